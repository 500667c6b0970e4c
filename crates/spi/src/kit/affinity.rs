//! `GetNotifyAffinity` of a software provider's completion and shared receive queues.

/// The processors a queue's notifications may be delivered on, as `(group, mask)`. A software
/// provider has no interrupts: notifications are delivered on whichever CPU drives the I/O,
/// which may be any CPU the calling thread may run on, so this reports that set
/// (`sched_getaffinity`; a restriction by `taskset` or a cpuset shows), the actual affinity,
/// which the SPI prefers to `ND_NOT_SUPPORTED` (docs/ND-RULES.md §2.5). Linux has no processor
/// groups: the group is 0, and the mask holds the CPUs numbered below `usize::BITS`.
pub fn notify_affinity() -> (u16, usize) {
    let mask = match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..usize::BITS as usize)
            .filter(|&cpu| set.is_set(cpu))
            .fold(0usize, |m, cpu| m | 1 << cpu),
        Err(_) => 0,
    };
    if mask != 0 {
        return (0, mask);
    }
    // Unknown, or only CPUs beyond the mask's width: every CPU the count says there is.
    let n = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(usize::BITS as usize);
    let all = if n == usize::BITS as usize {
        usize::MAX
    } else {
        (1usize << n) - 1
    };
    (0, all)
}

#[cfg(test)]
mod tests {
    /// The mask is the calling thread's CPU set, read back independently through
    /// `/proc/thread-self/status` (`Cpus_allowed_list`).
    #[test]
    fn the_mask_is_the_threads_cpu_set() {
        let status = std::fs::read_to_string("/proc/thread-self/status").expect("status");
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list")
            .trim();
        let mut want = 0usize;
        for part in list.split(',') {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.parse::<u32>().unwrap(), b.parse::<u32>().unwrap()),
                None => (part.parse().unwrap(), part.parse().unwrap()),
            };
            for cpu in lo..=hi.min(usize::BITS - 1) {
                want |= 1 << cpu;
            }
        }
        assert_eq!(super::notify_affinity(), (0, want));
    }

    /// Pinned to one CPU, a thread's queues report that CPU alone (not the first CPUs of the
    /// machine, counted).
    #[test]
    fn a_pinned_thread_reports_its_cpu() {
        let (_, all) = super::notify_affinity();
        let last = usize::BITS - 1 - all.leading_zeros();
        std::thread::spawn(move || {
            let mut one = rustix::thread::CpuSet::new();
            one.set(last as usize);
            rustix::thread::sched_setaffinity(None, &one).expect("pin");
            assert_eq!(super::notify_affinity(), (0, 1 << last));
        })
        .join()
        .expect("the pinned thread");
    }
}
