//! The partition of an operator's state key: a stable hash of the key an operator groups its
//! state by (a join key, a top-N partition), the first two bytes of every stored key, so that
//! state can later be split across worker threads by key hash.

/// How many partitions state keys are spread over.
pub const PARTITIONS: u16 = 256;

/// FNV-1a of `key`, modulo [`PARTITIONS`]: stable across versions and machines.
pub fn partition(key: &[u8]) -> u16 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % u64::from(PARTITIONS)) as u16
}

/// The stored key of a row kept in order within its partition (top-N and OVER window state):
/// `partition hash (u16) ++ partition ++ order ++ row key`.
pub fn ordered_key(partition: &[u8], order: &[u8], row_key: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + partition.len() + order.len() + row_key.len());
    key.extend_from_slice(&self::partition(partition).to_be_bytes());
    key.extend_from_slice(partition);
    key.extend_from_slice(order);
    key.extend_from_slice(row_key);
    key
}

/// The start of an ordered row's stored value: the partition's and the order's lengths, which
/// split its key again.
pub fn ordered_value(partition: &[u8], order: &[u8], capacity: usize) -> Vec<u8> {
    let mut value = Vec::with_capacity(8 + capacity);
    value.extend_from_slice(&(partition.len() as u32).to_le_bytes());
    value.extend_from_slice(&(order.len() as u32).to_le_bytes());
    value
}

/// An ordered row's (partition, order, row key) and the rest of its value; None when the
/// stored row is not one.
pub fn split_ordered<'a>(key: &'a [u8], value: &'a [u8]) -> Option<OrderedRow<'a>> {
    let length = |at: usize| -> Option<usize> {
        Some(u32::from_le_bytes(value.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let (partition_len, order_len) = (length(0)?, length(4)?);
    let rest = key.get(2..)?;
    if rest.len() < partition_len.checked_add(order_len)? {
        return None;
    }
    let (partition, rest) = rest.split_at(partition_len);
    let (order, row_key) = rest.split_at(order_len);
    Some(OrderedRow {
        partition,
        order,
        row_key,
        rest: &value[8..],
    })
}

pub struct OrderedRow<'a> {
    pub partition: &'a [u8],
    pub order: &'a [u8],
    pub row_key: &'a [u8],
    pub rest: &'a [u8],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ordered_row_splits_back_and_a_short_one_is_refused() {
        let key = ordered_key(b"pp", b"ooo", b"k");
        let mut value = ordered_value(b"pp", b"ooo", 3);
        value.extend_from_slice(b"row");
        let row = split_ordered(&key, &value).expect("splits");
        assert_eq!(
            (row.partition, row.order, row.row_key, row.rest),
            (&b"pp"[..], &b"ooo"[..], &b"k"[..], &b"row"[..])
        );
        assert!(split_ordered(&key, &value[..6]).is_none());
        assert!(split_ordered(&key[..3], &value).is_none());
    }
}
