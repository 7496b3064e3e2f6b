//! Adapters that run the db_bench workloads on strata's peers. Each is compiled only with its
//! feature, so the default build does not download or build them.

#[allow(unused_imports)]
use strata_tools::bench::{BenchEngine, BenchResult, EngineFactory};

/// Every peer compiled in that runs by default.
pub fn factories() -> Vec<Box<dyn EngineFactory>> {
    let peers: [Option<Box<dyn EngineFactory>>; 2] = [
        #[cfg(feature = "fjall")]
        Some(Box::new(fjall_peer::FjallFactory { kill_safe: false })),
        #[cfg(not(feature = "fjall"))]
        None,
        #[cfg(feature = "rocksdb")]
        Some(Box::new(rocksdb_peer::RocksFactory)),
        #[cfg(not(feature = "rocksdb"))]
        None,
    ];
    peers.into_iter().flatten().collect()
}

/// Peers that run only when named in `--engines`: `fjall-killsafe`, fjall with its journal
/// pushed to the OS after every write (`persist(PersistMode::Buffer)`), the guarantee strata's
/// and RocksDB's defaults give (an acknowledged write survives a process kill). fjall's default
/// keeps up to 8 KiB of acknowledged writes in a user-space buffer.
pub fn optional_factories() -> Vec<Box<dyn EngineFactory>> {
    #[cfg(feature = "fjall")]
    let v: Vec<Box<dyn EngineFactory>> = vec![Box::new(fjall_peer::FjallFactory { kill_safe: true })];
    #[cfg(not(feature = "fjall"))]
    let v: Vec<Box<dyn EngineFactory>> = Vec::new();
    v
}

#[cfg(feature = "fjall")]
mod fjall_peer {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

    use super::*;

    pub struct FjallFactory {
        /// Push the journal to the OS after every write (see `optional_factories`).
        pub kill_safe: bool,
    }

    pub struct FjallEngine {
        db: Database,
        ks: Keyspace,
        sync: bool,
        kill_safe: bool,
        dir: std::path::PathBuf,
    }

    impl FjallEngine {
        /// After an acknowledged write: fsync for fillsync, or hand the buffer to the OS.
        fn persist_write(&self) -> BenchResult<()> {
            if self.sync {
                self.db.persist(PersistMode::SyncData).map_err(|e| e.to_string())?;
            } else if self.kill_safe {
                self.db.persist(PersistMode::Buffer).map_err(|e| e.to_string())?;
            }
            Ok(())
        }
    }

    impl EngineFactory for FjallFactory {
        fn name(&self) -> &'static str {
            if self.kill_safe { "fjall-killsafe" } else { "fjall" }
        }
        fn open(&self, dir: &Path, sync: bool) -> BenchResult<Box<dyn BenchEngine>> {
            // fjall's defaults (each engine's default durability), and the
            // same 64 MiB block cache as strata's default.
            let db = Database::builder(dir).cache_size(64 << 20).open().map_err(|e| e.to_string())?;
            let ks = db.keyspace("bench", KeyspaceCreateOptions::default).map_err(|e| e.to_string())?;
            Ok(Box::new(FjallEngine { db, ks, sync, kill_safe: self.kill_safe, dir: dir.to_path_buf() }))
        }
    }

    impl BenchEngine for FjallEngine {
        fn put(&self, key: &[u8], value: &[u8]) -> BenchResult<()> {
            self.ks.insert(key, value).map_err(|e| e.to_string())?;
            self.persist_write()
        }
        fn put_batch(&self, kvs: &[(Vec<u8>, Vec<u8>)]) -> BenchResult<()> {
            let mut b = self.db.batch();
            for (k, v) in kvs {
                b.insert(&self.ks, k.as_slice(), v.as_slice());
            }
            b.commit().map_err(|e| e.to_string())?;
            self.persist_write()
        }
        fn get(&self, key: &[u8]) -> BenchResult<bool> {
            self.ks.get(key).map(|v| v.is_some()).map_err(|e| e.to_string())
        }
        fn scan(&self, start: Option<&[u8]>, n: usize, reverse: bool) -> BenchResult<usize> {
            let mut count = 0;
            match (start, reverse) {
                (Some(k), false) => {
                    for g in self.ks.range(k.to_vec()..).take(n) {
                        g.into_inner().map_err(|e| e.to_string())?;
                        count += 1;
                    }
                }
                (Some(k), true) => {
                    for g in self.ks.range(..=k.to_vec()).rev().take(n) {
                        g.into_inner().map_err(|e| e.to_string())?;
                        count += 1;
                    }
                }
                (None, false) => {
                    for g in self.ks.iter().take(n) {
                        g.into_inner().map_err(|e| e.to_string())?;
                        count += 1;
                    }
                }
                (None, true) => {
                    for g in self.ks.iter().rev().take(n) {
                        g.into_inner().map_err(|e| e.to_string())?;
                        count += 1;
                    }
                }
            }
            Ok(count)
        }
        fn settle(&self) -> BenchResult<Duration> {
            // Settled as strata and RocksDB are: the memtable flushed to tables first (fjall's
            // `rotate_memtable_and_wait`, hidden from its docs but public), then background
            // work done. fjall has no public "wait for compactions": wait until the folder size
            // has been stable for a second.
            self.ks.rotate_memtable_and_wait().map_err(|e| e.to_string())?;
            self.db.persist(PersistMode::SyncAll).map_err(|e| e.to_string())?;
            let deadline = Instant::now() + Duration::from_secs(600);
            let mut last = strata_tools::bench::dir_bytes(&self.dir);
            let mut stable_since = Instant::now();
            while Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(200));
                let now = strata_tools::bench::dir_bytes(&self.dir);
                if now != last {
                    last = now;
                    stable_since = Instant::now();
                } else if stable_since.elapsed() >= Duration::from_secs(1) {
                    break;
                }
            }
            // The quiet second only proves the work was done; it is not settling time.
            Ok(stable_since.elapsed())
        }
    }
}

#[cfg(feature = "rocksdb")]
mod rocksdb_peer {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use rocksdb::{BlockBasedOptions, Cache, DB, DBCompressionType, Options, WriteBatch, WriteOptions};

    use super::*;

    pub struct RocksFactory;

    pub struct RocksEngine {
        db: DB,
        sync: bool,
    }

    impl EngineFactory for RocksFactory {
        fn name(&self) -> &'static str {
            "rocksdb"
        }
        fn open(&self, dir: &Path, sync: bool) -> BenchResult<Box<dyn BenchEngine>> {
            let mut o = Options::default();
            o.create_if_missing(true);
            o.set_compression_type(DBCompressionType::Lz4);
            let mut t = BlockBasedOptions::default();
            // A 10 bits/key bloom filter, as strata and fjall have, and the same cache size.
            t.set_bloom_filter(10.0, false);
            t.set_block_cache(&Cache::new_lru_cache(64 << 20));
            o.set_block_based_table_factory(&t);
            let db = DB::open(&o, dir).map_err(|e| e.to_string())?;
            Ok(Box::new(RocksEngine { db, sync }))
        }
    }

    impl BenchEngine for RocksEngine {
        fn put(&self, key: &[u8], value: &[u8]) -> BenchResult<()> {
            let mut w = WriteOptions::default();
            w.set_sync(self.sync);
            self.db.put_opt(key, value, &w).map_err(|e| e.to_string())
        }
        fn put_batch(&self, kvs: &[(Vec<u8>, Vec<u8>)]) -> BenchResult<()> {
            let mut b = WriteBatch::default();
            for (k, v) in kvs {
                b.put(k, v);
            }
            self.db.write(b).map_err(|e| e.to_string())
        }
        fn get(&self, key: &[u8]) -> BenchResult<bool> {
            self.db.get_pinned(key).map(|v| v.is_some()).map_err(|e| e.to_string())
        }
        fn scan(&self, start: Option<&[u8]>, n: usize, reverse: bool) -> BenchResult<usize> {
            // The raw iterator hands out borrowed key and value slices, as strata and fjall are
            // read in place (`iterator()` would allocate two boxes per entry).
            let mut it = self.db.raw_iterator();
            match (start, reverse) {
                (Some(k), false) => it.seek(k),
                (Some(k), true) => it.seek_for_prev(k),
                (None, false) => it.seek_to_first(),
                (None, true) => it.seek_to_last(),
            }
            let mut count = 0;
            while count < n && it.valid() {
                std::hint::black_box((it.key(), it.value()));
                count += 1;
                if reverse {
                    it.prev();
                } else {
                    it.next();
                }
            }
            it.status().map_err(|e| e.to_string())?;
            Ok(count)
        }
        fn settle(&self) -> BenchResult<Duration> {
            self.db.flush().map_err(|e| e.to_string())?;
            let deadline = Instant::now() + Duration::from_secs(600);
            while Instant::now() < deadline {
                let pending = self.db.property_int_value("rocksdb.compaction-pending").ok().flatten().unwrap_or(0);
                let running = self.db.property_int_value("rocksdb.num-running-compactions").ok().flatten().unwrap_or(0);
                let flushes = self.db.property_int_value("rocksdb.num-running-flushes").ok().flatten().unwrap_or(0);
                if pending == 0 && running == 0 && flushes == 0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(Duration::ZERO)
        }
    }
}
