//! `strata`: the command line of the strata table store. See `strata --help`.

/// mimalloc: measurably faster than the system allocator for strata's many small buffers.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    strata_tools::allocator::return_freed_memory_promptly();
    let args: Vec<String> = std::env::args().collect();
    // stderr is not locked for the whole run: progress bars draw to it from their own ticker
    // thread, which would wait forever for a lock this thread holds.
    let code = strata_tools::cli::run(args, &mut std::io::stdout().lock(), &mut std::io::stderr());
    std::process::exit(code);
}
