//! The partition of an operator's state key: a stable hash of the key an operator groups its
//! state by (a join key, a top-N partition), the first two bytes of every stored key, so that
//! state can later be split across worker threads by key hash.

/// How many partitions state keys are spread over.
const PARTITIONS: u16 = 256;

/// FNV-1a of `key`, modulo [`PARTITIONS`]: stable across versions and machines.
pub fn partition(key: &[u8]) -> u16 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % u64::from(PARTITIONS)) as u16
}
