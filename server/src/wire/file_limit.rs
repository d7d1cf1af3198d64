//! Each connection holds a file descriptor, and so do the store, the listeners and the sources.
//! At start, `--max-connections` is checked against the process's limit on open files: the soft
//! limit is raised toward the hard one as far as needed, and when even that cannot serve them
//! all, the connections are cut to what it can (with a warning), so that descriptors never run
//! out under a full load of clients.

/// Descriptors kept for everything but client connections: the store's files, the listeners,
/// file and Kafka sources, the metrics endpoint, logs.
pub const RESERVED_DESCRIPTORS: u64 = 128;

/// How many connections the file limit lets the server take, raising the soft limit if that
/// helps. `Err` when it cannot take even one.
pub fn connections_served(requested: usize) -> Result<usize, String> {
    let wanted = (requested as u64).saturating_add(RESERVED_DESCRIPTORS);
    let limit = match rlimit::increase_nofile_limit(wanted) {
        Ok(limit) => limit,
        Err(error) => {
            tracing::warn!(%error, "cannot read or raise the limit on open files; --max-connections is not checked against it");
            return Ok(requested);
        }
    };
    if limit >= wanted {
        return Ok(requested);
    }
    let served = limit.saturating_sub(RESERVED_DESCRIPTORS);
    if served == 0 {
        return Err(format!(
            "the limit on open files ({limit}, see `ulimit -n`) leaves no descriptor for \
             clients: Eddy keeps {RESERVED_DESCRIPTORS} for itself"
        ));
    }
    let served = usize::try_from(served).unwrap_or(requested).min(requested);
    tracing::warn!(
        requested,
        served,
        open_files_limit = limit,
        "--max-connections is more than the limit on open files can serve (`ulimit -n`, \
         less {RESERVED_DESCRIPTORS} kept for the server): taking {served} connections at most"
    );
    Ok(served)
}
