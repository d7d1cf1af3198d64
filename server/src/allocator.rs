//! The server's memory allocator, and giving freed memory back to the system when idle.

use std::cell::Cell;
use std::time::{Duration, Instant};

// Batches are allocated and freed by several threads at a high rate; glibc's per-thread
// arenas fragment under that (RSS measured about twice the live data), mimalloc does not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc commits each arena it reserves up front, which with transparent huge pages made
/// ~50 MiB of an idle server resident (and ~90 MiB more of the q7 benchmark's peak). The
/// option must be set before the first allocation, which Rust's runtime makes before `main`,
/// so it is set by an ELF constructor. `MIMALLOC_ARENA_EAGER_COMMIT` still overrides it.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
#[used]
#[link_section = ".init_array"]
static CONFIGURE_ALLOCATOR: extern "C" fn() = configure_allocator;

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
extern "C" fn configure_allocator() {
    /// `mi_option_arena_eager_commit` in mimalloc 3's option list.
    const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
    // SAFETY: sets one of mimalloc's option defaults; nothing else runs yet.
    unsafe { libmimalloc_sys::mi_option_set_default(ARENA_EAGER_COMMIT, 0) }
}

/// How often at most one thread hands its freed pages back on going idle.
const COLLECT_EVERY: Duration = Duration::from_millis(100);

thread_local! {
    static LAST_COLLECT: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Called when a runtime worker goes idle. mimalloc returns a thread's free pages, and purges
/// them from memory, only when that thread next allocates: a worker that freed a client's
/// 1 MiB statement and then parks would keep it resident for as long as it stays idle (40 idle
/// connections measured 39 MiB). Collecting on park, at most every 100 ms per thread, costs
/// nothing under load and lets an idle server shrink.
pub fn return_idle_memory() {
    let now = Instant::now();
    let due = LAST_COLLECT.with(|last| {
        let due = last
            .get()
            .is_none_or(|at| now.duration_since(at) >= COLLECT_EVERY);
        if due {
            last.set(Some(now));
        }
        due
    });
    if due {
        #[allow(unsafe_code)]
        // SAFETY: `mi_collect` only walks the calling thread's own heap.
        unsafe {
            libmimalloc_sys::mi_collect(false)
        }
    }
}

/// mimalloc purges the pages a collection handed back only after a delay (100 ms for arenas),
/// and only when some thread calls into it again. A once-a-second tick wakes a worker, whose
/// park after it collects again, so an idle server's freed memory leaves within a second.
pub fn spawn_idle_purge() {
    tokio::spawn(async {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
        }
    });
}
