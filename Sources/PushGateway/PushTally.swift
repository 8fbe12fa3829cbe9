import PushService
import PushWire

/// The counts of one PUSH gathered from everywhere it went: this loop's devices, the other
/// loops of the process, the nodes of a cluster and the queues written for offline devices.
/// Complete once every part has ended; then its completion gets the sums ([4.13-3]). The
/// one gather of the gateway, whichever kind of destination a part went to. Loop-confined.
final class PushTally {
    /// Who hears the sums. The two on every forwarded PUSH's path are cases of their own,
    /// so that a tally costs one allocation, not a second for a closure's context.
    enum Completion {
        /// The provider whose PUSH this is: PUSH_ACK, and how long it took.
        case provider(GatewayServer, GatewayServer.Peer, correlation: UInt32, startNs: UInt64)
        /// The loop that sent this one its share of a PUSH, under that loop's token.
        case loop(LoopForwarding, origin: Int, token: UInt64)
        case call((PushAck) -> Void)
        case done
    }

    private(set) var written: UInt32 = 0
    private(set) var queued: UInt32 = 0
    /// Matching devices only the cluster could reach, while this node could not reach NATS
    /// or JetStream: the PUSH is then answered BUSY, for its sender to retry ([4.13-13]).
    private(set) var unreached: UInt32 = 0
    private var outstanding = 1
    private var completion: Completion

    init(_ completion: Completion) {
        self.completion = completion
    }

    convenience init(completion: @escaping (PushAck) -> Void) {
        self.init(.call(completion))
    }

    func add(written: UInt32 = 0, queued: UInt32 = 0) {
        self.written &+= written
        self.queued &+= queued
    }

    func add(_ ack: PushAck) {
        add(written: ack.written, queued: ack.queued)
    }

    func add(unreached: UInt32) {
        self.unreached &+= unreached
    }

    /// One more part to wait for.
    func begin() { outstanding += 1 }

    /// A part is done; the last one completes the tally. `seal()` ends the part the
    /// tally starts with, once every part was begun.
    func end() {
        outstanding -= 1
        guard outstanding == 0 else { return }
        let ack = PushAck(written: written, queued: queued)
        switch completion {
        case .provider(let server, let peer, let correlation, let startNs):
            server.answer(push: ack, unreached: unreached, correlation: correlation, peer: peer, startNs: startNs)
        case .loop(let forwarding, let origin, let token):
            forwarding.answer(LoopPushAck(token: token, ack: ack, unreached: unreached), to: origin)
        case .call(let completion):
            // A forwarded push's counts: the cluster's reply has no place for `unreached`.
            completion(ack)
        case .done:
            return
        }
        completion = .done
    }

    func seal() { end() }
}
