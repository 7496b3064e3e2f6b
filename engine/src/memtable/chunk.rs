//! Memory for one arena chunk: an anonymous mapping of its own, kept off transparent huge
//! pages, viewed as 64-bit atomic words.
//!
//! Why a mapping of its own rather than the allocator: the first write to a fresh huge page
//! costs the kernel (and on a virtual machine, the host) a 2 MiB zeroing at once. On the
//! development VM a first touch of huge-page memory ran at 336–351 MB/s against 2.6–2.8 GB/s
//! for 4 KiB pages (docs/PERFORMANCE.md), and mimalloc advises its whole heap for huge pages,
//! so a fresh chunk stalled the writer in 2 MiB steps (about 200 ms for a 72 MiB one).
//! RocksDB keeps its memtable arena off huge pages by default for the same reason
//! (`memtable_huge_page_size` is 0). A mapping costs nothing until written (the kernel zero-fills each page on its first
//! write) and is returned to the system when the chunk is dropped.
//!
//! The mapping is viewed as atomics through `zerocopy` (a checked cast of the exclusively
//! borrowed bytes) and kept together with that view by `ouroboros`, so no `unsafe` is written
//! here. Where no mapping can be made, the chunk comes zeroed from the allocator instead.

use std::sync::atomic::AtomicU64;

/// A chunk's words: mapped, or from the allocator.
pub enum Chunk {
    /// An anonymous mapping (Linux).
    #[cfg(target_os = "linux")]
    Mapped(mapped::MappedWords),
    /// Zeroed memory from the allocator (`calloc`).
    Heap(Box<[AtomicU64]>),
}

impl Chunk {
    /// A zeroed chunk of `words` words; its pages are faulted in as they are first written.
    pub fn fresh(words: usize) -> Chunk {
        #[cfg(target_os = "linux")]
        if let Some(m) = mapped::map(words) {
            return Chunk::Mapped(m);
        }
        Chunk::Heap(bytemuck::allocation::zeroed_slice_box(words))
    }
}

impl Default for Chunk {
    /// An empty chunk.
    fn default() -> Self {
        Chunk::Heap(Box::default())
    }
}

impl std::ops::Deref for Chunk {
    type Target = [AtomicU64];

    #[inline]
    fn deref(&self) -> &[AtomicU64] {
        match self {
            #[cfg(target_os = "linux")]
            Chunk::Mapped(m) => m.borrow_words(),
            Chunk::Heap(b) => b,
        }
    }
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            #[cfg(target_os = "linux")]
            Chunk::Mapped(_) => "mapped",
            Chunk::Heap(_) => "heap",
        };
        write!(f, "Chunk({kind}, {} words)", self.len())
    }
}

#[cfg(target_os = "linux")]
mod mapped {
    use std::sync::atomic::AtomicU64;

    use memmap2::{Advice, MmapMut};
    use zerocopy::FromBytes;

    /// An anonymous mapping and its view as words.
    #[ouroboros::self_referencing]
    pub struct MappedWords {
        map: MmapMut,
        #[borrows(mut map)]
        pub words: &'this [AtomicU64],
    }

    /// A fresh mapping of `words` words, or `None` if it cannot be made.
    pub fn map(words: usize) -> Option<MappedWords> {
        let map = MmapMut::map_anon(words.checked_mul(8)?.max(8)).ok()?;
        // Only advice: with transparent huge pages set to "always" the kernel would back the
        // mapping with huge pages unasked; a refusal leaves the mapping as good as before.
        let _ = map.advise(Advice::NoHugePage);
        MappedWordsTryBuilder {
            map,
            // A mapping is page-aligned and whole words long, so the cast cannot fail.
            words_builder: |m: &mut MmapMut| <[AtomicU64]>::mut_from_bytes(&mut m[..]).map(|w| &*w).map_err(|_| ()),
        }
        .try_build()
        .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_fresh_chunk_is_zeroed_writable_and_word_aligned() {
        for words in [1, 8191, 1 << 16] {
            let c = Chunk::fresh(words);
            assert_eq!(c.len(), words);
            assert!(c.iter().all(|w| w.load(Ordering::Relaxed) == 0));
            c[words - 1].store(7, Ordering::Relaxed);
            assert_eq!(c[words - 1].load(Ordering::Relaxed), 7);
            #[cfg(target_os = "linux")]
            assert!(matches!(c, Chunk::Mapped(_)), "{c:?}");
        }
        assert!(Chunk::default().is_empty());
    }
}
