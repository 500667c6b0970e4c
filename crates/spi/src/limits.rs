//! The argument checks of the `Create*` calls against an adapter's limits
//! (`ND2_ADAPTER_INFO`), with the parameter numbers ND reports (`ND_INVALID_PARAMETER_n`,
//! docs/ND-RULES.md G11). `netdirect` makes them before calling a provider; the SPI kit (for
//! queue pairs, the provider, once it has recognised the queues) makes them again, so that a
//! provider object reached directly (`as_spi()`) refuses what would otherwise size its queues
//! from an unchecked number.

use crate::traits::QueuePairConfig;
use crate::{AdapterInfo, Error, Result, Status};

fn check(ok: bool, param: u32) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::invalid_parameter(param))
    }
}

/// `CreateCompletionQueue`: `depth` 1..=`MaxCompletionQueueDepth` (D3: the maximum itself is
/// allowed), else `ND_INVALID_PARAMETER_3`.
pub fn completion_queue(info: &AdapterInfo, depth: u32) -> Result<()> {
    check(depth > 0 && depth <= info.max_completion_queue_depth, 3)
}

/// `CreateSharedReceiveQueue`: depth 1..=`MaxSharedReceiveQueueDepth` → else `_3`, SGE
/// count → `_4`. The method lists no `ND_NOT_SUPPORTED` (CreateQueuePairWithSrq does): an
/// adapter without shared receive queues (maximum depth 0) refuses every depth as `_3`.
pub fn shared_receive_queue(info: &AdapterInfo, depth: u32, max_request_sge: u32) -> Result<()> {
    check(depth > 0 && depth <= info.max_shared_receive_queue_depth, 3)?;
    check(max_request_sge <= info.max_receive_sge, 4)
}

/// `CreateQueuePair` (receive depth `_5`, initiator depth `_6`, receive SGEs `_7`, initiator
/// SGEs `_8`, inline size `_9`) or, with an SRQ, `CreateQueuePairWithSrq` (`ND_NOT_SUPPORTED`
/// without SRQs; initiator depth `_6`, initiator SGEs `_7`, inline size `_8`).
pub fn queue_pair(info: &AdapterInfo, cfg: &QueuePairConfig) -> Result<()> {
    let i = info;
    // Only a depth beyond the adapter's limit is an error (IND2Adapter::CreateQueuePair: "exceeded
    // the limits"); a depth of 0 gets a queue of one, as "providers are free to return more
    // resources than requested" (a one-sided-only queue pair asks for no Receives).
    let initiator = cfg.initiator_queue_depth <= i.max_initiator_queue_depth;
    if cfg.srq.is_some() {
        if i.max_shared_receive_queue_depth == 0 {
            return Err(Error::new(Status::NOT_SUPPORTED));
        }
        check(initiator, 6)?;
        check(cfg.max_initiator_request_sge <= i.max_initiator_sge, 7)?;
        return check(cfg.inline_data_size <= i.max_inline_data_size, 8);
    }
    check(cfg.receive_queue_depth <= i.max_receive_queue_depth, 5)?;
    check(initiator, 6)?;
    check(cfg.max_receive_request_sge <= i.max_receive_sge, 7)?;
    check(cfg.max_initiator_request_sge <= i.max_initiator_sge, 8)?;
    check(cfg.inline_data_size <= i.max_inline_data_size, 9)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> AdapterInfo {
        AdapterInfo {
            max_completion_queue_depth: 64,
            max_shared_receive_queue_depth: 32,
            max_receive_sge: 4,
            ..AdapterInfo::default()
        }
    }

    fn status(r: Result<()>) -> Option<Status> {
        r.err().map(|e| e.status())
    }

    #[test]
    fn completion_queue_depth_is_parameter_3_and_the_maximum_is_allowed() {
        let i = info();
        assert_eq!(status(completion_queue(&i, 1)), None);
        assert_eq!(status(completion_queue(&i, 64)), None, "D3: the maximum");
        for bad in [0, 65, u32::MAX] {
            assert_eq!(
                status(completion_queue(&i, bad)),
                Some(Status::INVALID_PARAMETER_3),
                "depth {bad}"
            );
        }
    }

    #[test]
    fn shared_receive_queues_need_the_capability_then_fit_the_limits() {
        let i = info();
        assert_eq!(status(shared_receive_queue(&i, 32, 4)), None);
        assert_eq!(
            status(shared_receive_queue(&i, 0, 1)),
            Some(Status::INVALID_PARAMETER_3)
        );
        assert_eq!(
            status(shared_receive_queue(&i, 33, 1)),
            Some(Status::INVALID_PARAMETER_3)
        );
        assert_eq!(
            status(shared_receive_queue(&i, 1, 5)),
            Some(Status::INVALID_PARAMETER_4)
        );
        // An adapter without SRQs refuses every depth, as beyond its maximum of 0 (the
        // method has no ND_NOT_SUPPORTED); CreateQueuePairWithSrq says ND_NOT_SUPPORTED.
        let none = AdapterInfo {
            max_shared_receive_queue_depth: 0,
            ..i
        };
        for depth in [0, 1, 32] {
            assert_eq!(
                status(shared_receive_queue(&none, depth, 1)),
                Some(Status::INVALID_PARAMETER_3)
            );
        }
    }
}
