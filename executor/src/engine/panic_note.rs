//! The message of a panic on the engine thread, kept for the statement it interrupted.
//!
//! The engine survives a panic (it abandons the epoch), but the command being handled is
//! unwound with it and its reply dropped unanswered. A panic hook runs before the unwinding,
//! so the message is here by the time the waiting client sees the drop, and it gets the
//! message (XX000) instead of "the engine stopped".

use std::sync::{Mutex, Once};

static LAST: Mutex<Option<String>> = Mutex::new(None);

/// Wraps the process's panic hook once: panics on the engine thread are noted, then reported
/// as before.
pub(super) fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() == Some(super::ENGINE_THREAD) {
                let payload = info.payload();
                let what = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
                *LAST.lock().unwrap_or_else(|e| e.into_inner()) = Some(what);
            }
            previous(info);
        }));
    });
}

/// The last engine panic's message, if one happened since the last call.
pub(super) fn take() -> Option<String> {
    LAST.lock().unwrap_or_else(|e| e.into_inner()).take()
}
