import PushWire

/// Since when a device's output has held bytes its side has not taken, and how many it had
/// taken then ([5.5-7]).
struct OutputStall {
    var taken: UInt64
    var sinceNs: UInt64
}

extension GatewayLogic {
    /// The stall rule ([5.5-7]), for one connected device, on the driver's periodic sweep
    /// (`nowNs` on the clock of `QueuedPush.writtenAtNs`, `Clocks.monotonicNanoseconds`):
    /// a device that has left frames the gateway started unanswered (pushes in flight, or a
    /// MISSED it may not have read) and whose side has taken no byte of the link's output
    /// for `outputStallMs` is closed as a slow consumer (`.stalled`); its unacknowledged
    /// pushes go back to its queue ([4.14-7]). A device that takes the bytes and does not
    /// acknowledge is paced by its window and never closed by this rule.
    ///
    /// The link is asked (`outputProgress`, system calls) only once the oldest unanswered
    /// frame has waited half the limit, so the devices that acknowledge as they read cost no
    /// call, even on a gateway so busy that acknowledgements take seconds; a stall is timed
    /// from the first look that saw it, so the device is never closed early, and at most half
    /// the limit and two sweeps late.
    public func checkOutputStall(_ record: DeviceRecord, nowNs: UInt64) {
        let limitNs = UInt64(max(0, settings.outputStallMs)) &* 1_000_000
        guard limitNs > 0, let link = record.link else { return }
        guard let waited = unansweredWait(record, nowNs: nowNs), waited >= limitNs / 2,
              let output = link.outputProgress, output.notTaken > 0 else {
            if !stalls.isEmpty { stalls[RecordKey(record)] = nil }
            return
        }
        let key = RecordKey(record)
        guard let stall = stalls[key], stall.taken == output.taken else {
            // First seen, or the device's side took bytes since: the time starts now.
            stalls[key] = OutputStall(taken: output.taken, sinceNs: nowNs)
            return
        }
        guard nowNs &- stall.sinceNs >= limitNs else { return }
        actions.append(.stalled(link))
        detach(record)
    }

    /// How long the oldest frame the gateway started and the device has not answered has
    /// waited: its oldest push in flight, else a MISSED it may not have read; nil if none.
    private func unansweredWait(_ record: DeviceRecord, nowNs: UInt64) -> UInt64? {
        if let oldest = record.inFlight.pushes.first {
            return nowNs >= oldest.writtenAtNs ? nowNs - oldest.writtenAtNs : 0
        }
        guard record.missedUnconfirmed > 0 else { return nil }
        let units = Int32(bitPattern: DeviceRecord.coarseTime(nowNs) &- record.missedWrittenAt)
        return UInt64(max(0, units)) << 10
    }
}
