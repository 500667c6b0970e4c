//! `GetNotifyAffinity` of a software provider's completion and shared receive queues.

/// The processors a queue's notifications may be delivered on, as `(group, mask)`. A software
/// provider has no interrupts: notifications are delivered on whichever CPU drives the I/O, so
/// this reports every CPU of group 0, the actual affinity (the SPI prefers that to
/// `ND_NOT_SUPPORTED`).
pub fn notify_affinity() -> (u16, usize) {
    let n = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(usize::BITS as usize);
    let mask = if n == usize::BITS as usize {
        usize::MAX
    } else {
        (1usize << n) - 1
    };
    (0, mask)
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_bit_per_cpu_of_group_0() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (group, mask) = super::notify_affinity();
        assert_eq!(group, 0);
        assert_eq!(mask.count_ones() as usize, n.min(usize::BITS as usize));
        assert_eq!(mask & 1, 1, "CPU 0 is always there");
    }
}
