/// The counts of one PUSH across the cluster, complete once every node that holds a
/// target has answered and every offline device's queue was written. Loop-confined.
final class PushTally {
    private(set) var written: UInt32 = 0
    private(set) var queued: UInt32 = 0
    private var outstanding = 1
    private var completion: ((UInt32, UInt32) -> Void)?

    init(completion: @escaping (_ written: UInt32, _ queued: UInt32) -> Void) {
        self.completion = completion
    }

    func add(written: UInt32 = 0, queued: UInt32 = 0) {
        self.written &+= written
        self.queued &+= queued
    }

    /// One more part to wait for.
    func begin() { outstanding += 1 }

    /// A part is done; the last one completes the tally. `seal()` ends the part the
    /// tally starts with, once every part was begun.
    func end() {
        outstanding -= 1
        guard outstanding == 0, let completion else { return }
        self.completion = nil
        completion(written, queued)
    }

    func seal() { end() }
}
