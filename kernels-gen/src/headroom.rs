//! Buffers kept from step to step grow with headroom, so a steady state of steps allocates
//! nothing even when batches vary a little in size.

/// Makes room in `v` for `n` elements. When it must grow, it grows to a quarter more than `n`:
/// one warm-up step sizes it for the batches after it, which differ from it by a few percent
/// (plain `Vec` growth would reallocate again at the first slightly larger batch).
pub fn reserve_for<T>(v: &mut Vec<T>, n: usize) {
    if v.capacity() < n {
        v.reserve_exact(n + n / 4 - v.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_a_quarter_past_what_was_asked_and_only_when_needed() {
        let mut v: Vec<u32> = vec![1, 2];
        reserve_for(&mut v, 100);
        assert!(v.capacity() >= 125);
        assert_eq!(v, vec![1, 2]);
        let address = v.as_ptr();
        reserve_for(&mut v, 120);
        assert_eq!(v.as_ptr(), address, "room enough: not moved");
    }
}
