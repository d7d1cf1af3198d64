//! Scheduling priority of the threads that take data in. Sources read and decode as fast as the
//! cores allow; when the cores are contended, the threads a statement's acknowledgement waits on
//! (the server's, the engine's, the committer's) go first, so that a heavy source cannot make a
//! small INSERT wait for a core. On an idle machine the sources still get every core.

/// The nice value of source threads (the default is 0; higher runs less under contention).
/// Under contention a thread at 10 gets about a tenth of a core against one at 0: enough to keep
/// ingesting, not enough to hold statements back.
pub const SOURCE_NICE: i32 = 10;

/// Lowers the calling thread's priority to that of a source thread. Linux only: there a process
/// priority set for "the calling process" is the calling thread's alone (elsewhere it would be
/// the whole process's, so nothing is done); a failure leaves the priority as it was.
pub fn lower_for_sources() {
    #[cfg(target_os = "linux")]
    if let Err(error) = rustix::process::setpriority_process(None, SOURCE_NICE) {
        tracing::debug!(%error, "could not lower a source thread's priority");
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn a_source_thread_runs_at_the_source_priority() {
        let nice = std::thread::spawn(|| {
            super::lower_for_sources();
            rustix::process::getpriority_process(None).unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(nice, super::SOURCE_NICE);
        // The thread's alone: this one runs as before.
        assert_ne!(
            rustix::process::getpriority_process(None).unwrap(),
            super::SOURCE_NICE
        );
    }
}
