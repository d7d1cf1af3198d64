//! Random values per event (a splitmix64 stream seeded from the event id), and the strings
//! drawn once per generator (channels, urls, the letters `extra` is sliced from).

use super::*;

/// Keeps the out-of-order draws apart from the events' other random values.
pub(super) const OUT_OF_ORDER_SALT: u64 = 0x6f75_745f_6f66_5f6f;
/// Keeps the pools' draws apart from the events' random values.
pub(super) const POOL_SALT: u64 = 0x706f_6f6c_735f_5f5f;
pub(super) const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The splitmix64 finalizer: a bijective scramble of 64 bits.
pub(super) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A splitmix64 stream: tiny, fast, and good enough for synthetic data. Each event gets its
/// own stream so that any event can be regenerated without the ones before it.
pub(super) struct EventRng(u64);

impl EventRng {
    pub(super) fn new(seed: u64, event_id: u64) -> Self {
        Self(mix64(seed ^ mix64(event_id.wrapping_add(GOLDEN_GAMMA))))
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN_GAMMA);
        mix64(self.0)
    }

    /// Uniform in `[0, n)` (multiply-shift; the bias is below 2^-40 for our `n`).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    pub(super) fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// Uniform in `[0, 1)`, 53 random bits.
    pub(super) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Strings drawn once per generator (from the seed alone): channel names and urls, and the
/// pool of letters `extra` is sliced from.
pub(super) struct Pools {
    pub(super) hot_urls: Vec<String>,
    pub(super) channels: Vec<String>,
    pub(super) channel_urls: Vec<String>,
    pub(super) letters: String,
}

impl Pools {
    pub(super) fn new(seed: u64) -> Self {
        let mut rng = EventRng(mix64(seed ^ POOL_SALT));
        let hot_urls = HOT_CHANNELS.iter().map(|_| base_url(&mut rng)).collect();
        let mut channels = Vec::with_capacity(CHANNELS_NUMBER);
        let mut channel_urls = Vec::with_capacity(CHANNELS_NUMBER);
        for i in 0..CHANNELS_NUMBER {
            let mut url = base_url(&mut rng);
            // Most channel urls carry a channel id (the bit-reversed channel number).
            if rng.below(10) > 0 {
                let id = (i as i32).reverse_bits().unsigned_abs();
                url.push_str(&format!("&channel_id={id}"));
            }
            channels.push(format!("channel-{i}"));
            channel_urls.push(url);
        }
        let mut letters = Vec::with_capacity(EXTRA_POOL_BYTES);
        while letters.len() < EXTRA_POOL_BYTES {
            // Eight letters per draw: each byte scaled into 0..26.
            for byte in rng.next_u64().to_le_bytes() {
                letters.push(b'a' + ((u32::from(byte) * 26) >> 8) as u8);
            }
        }
        let letters = String::from_utf8(letters).unwrap_or_default();
        Self {
            hot_urls,
            channels,
            channel_urls,
            letters,
        }
    }

    /// Random letters that pad a row of `current` bytes to about `average` bytes: a length
    /// uniform within ±20% of the difference (empty when the row is already that large).
    pub(super) fn extra(&self, rng: &mut EventRng, current: usize, average: usize) -> &str {
        if current >= average {
            return "";
        }
        let desired = (average - current) as u64;
        let delta = (desired as f64 * 0.2).round() as u64;
        let len = desired - delta + if delta > 0 { rng.below(2 * delta) } else { 0 };
        let len = (len as usize).min(self.letters.len());
        let start = rng.index(self.letters.len() - len + 1);
        // The pool is ASCII, so any byte range is a valid str.
        self.letters.get(start..start + len).unwrap_or_default()
    }
}

/// `https://www.nexmark.com/<w>/<w>/<w>/item.htm?query=1` with three short random words.
pub(super) fn base_url(rng: &mut EventRng) -> String {
    let mut url = String::from("https://www.nexmark.com");
    for _ in 0..3 {
        let mut word = StackStr::<8>::new();
        word.push_word(rng, 5, b'_');
        url.push('/');
        url.push_str(word.as_str());
    }
    url.push_str("/item.htm?query=1");
    url
}

/// A short ASCII string on the stack, so that building a value does not allocate.
pub(super) struct StackStr<const N: usize> {
    pub(super) buf: [u8; N],
    pub(super) len: usize,
}

impl<const N: usize> StackStr<N> {
    pub(super) fn new() -> Self {
        Self {
            buf: [0; N],
            len: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Appends ASCII bytes (truncating at capacity, which the callers never reach).
    pub(super) fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(N - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    /// Appends `value` in decimal, zero-padded to `width` digits.
    pub(super) fn push_digits(&mut self, mut value: u64, width: usize) {
        let mut digits = [b'0'; 20];
        let width = width.min(digits.len());
        for d in digits[..width].iter_mut().rev() {
            *d = b'0' + (value % 10) as u8;
            value /= 10;
        }
        self.push(&digits[..width]);
    }

    /// Appends a Nexmark "next string": 3 to `max_len - 1` characters, each a random lowercase
    /// letter or, one time in 13, `special`; spaces at either end are trimmed.
    pub(super) fn push_word(&mut self, rng: &mut EventRng, max_len: u64, special: u8) {
        let n = 3 + rng.below(max_len - 3) as usize;
        let start = self.len;
        for _ in 0..n {
            let c = if rng.below(13) == 0 {
                special
            } else {
                b'a' + rng.below(26) as u8
            };
            self.push(&[c]);
        }
        let word = &self.buf[start..self.len];
        let lead = word.iter().take_while(|&&c| c == b' ').count();
        let trail = word[lead..]
            .iter()
            .rev()
            .take_while(|&&c| c == b' ')
            .count();
        let kept = word.len() - lead - trail;
        self.buf
            .copy_within(start + lead..start + lead + kept, start);
        self.len = start + kept;
    }

    pub(super) fn as_str(&self) -> &str {
        // Only ASCII is ever pushed.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}
