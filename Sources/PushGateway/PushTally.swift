import PushWire

/// The counts of one PUSH gathered from everywhere it went: this loop's devices, the other
/// loops of the process, the nodes of a cluster and the queues written for offline devices.
/// Complete once every part has ended; then the completion gets the sums ([4.13-3]). The
/// one gather of the gateway, whichever kind of destination a part went to. Loop-confined.
final class PushTally {
    @exclusivity(unchecked) private(set) var written: UInt32 = 0
    @exclusivity(unchecked) private(set) var queued: UInt32 = 0
    @exclusivity(unchecked) private var outstanding = 1
    @exclusivity(unchecked) private var completion: ((PushAck) -> Void)?

    init(completion: @escaping (PushAck) -> Void) {
        self.completion = completion
    }

    func add(written: UInt32 = 0, queued: UInt32 = 0) {
        self.written &+= written
        self.queued &+= queued
    }

    func add(_ ack: PushAck) {
        add(written: ack.written, queued: ack.queued)
    }

    /// One more part to wait for.
    func begin() { outstanding += 1 }

    /// A part is done; the last one completes the tally. `seal()` ends the part the
    /// tally starts with, once every part was begun.
    func end() {
        outstanding -= 1
        guard outstanding == 0, let completion else { return }
        self.completion = nil
        completion(PushAck(written: written, queued: queued))
    }

    func seal() { end() }
}
