import PushEventLoop
import PushWire

/// One loop's part in a gateway of several: carries out the logic's `.forward(to: .loop)`
/// (a device target goes to its home loop only; a user or tag target to every loop, each
/// matching the devices whose home it is), one batch per loop per turn, and gives the
/// provider one PUSH_ACK summing every loop's answer ([4.13-3]). Loop-confined.
final class LoopForwarding {
    let placement: LoopPlacement
    let router: GatewayLoopRouter
    private let loop: EventLoop
    private unowned let server: GatewayServer
    /// Per destination loop, the pushes to send at the end of this turn.
    private var outgoing: [[LoopPush]]
    private var flush: LoopTimer?
    private var awaiting: [UInt64: AwaitedAck] = [:]
    private var nextToken: UInt64 = 0

    /// A provider's PUSH waiting for other loops' counts.
    private struct AwaitedAck {
        var peer: GatewayServer.Peer
        var correlation: UInt32
        var startNs: UInt64
        var ack: PushAck
        var remaining: Int
    }

    init(placement: LoopPlacement, router: GatewayLoopRouter, loop: EventLoop, server: GatewayServer) {
        self.placement = placement
        self.router = router
        self.loop = loop
        self.server = server
        outgoing = Array(repeating: [], count: placement.count)
    }

    /// The provider's PUSH whose `.forward` actions are being carried out (`begin` to
    /// `end`), and how many loops it went to.
    @exclusivity(unchecked) private var forwarding: (push: Push, sent: Int)?

    /// The logic handled a provider's PUSH here; its forwards follow.
    func begin(_ push: Push) {
        forwarding = (push, 0)
    }

    /// The logic's `.forward(to: .loop(index))` for the PUSH being handled.
    func forward(to index: Int) {
        guard var current = forwarding else { return }
        send(LoopPush(push: current.push, token: nextToken), to: index)
        current.sent += 1
        forwarding = current
    }

    /// The forwards are out. Returns whether there were any: the provider's answer then
    /// waits for every loop's counts, which join `ack`, the counts of this loop.
    func end(ack: PushAck, correlation: UInt32, peer: GatewayServer.Peer, startNs: UInt64) -> Bool {
        guard let current = forwarding else { return false }
        forwarding = nil
        guard current.sent > 0 else { return false }
        awaiting[nextToken] = AwaitedAck(peer: peer, correlation: correlation, startNs: startNs, ack: ack, remaining: current.sent)
        nextToken &+= 1
        return true
    }

    private func send(_ push: LoopPush, to index: Int) {
        outgoing[index].append(push)
        guard flush == nil else { return }
        flush = loop.schedule(after: .zero) { [weak self] in self?.flushOutgoing() }
    }

    private func flushOutgoing() {
        flush = nil
        let origin = placement.index
        for index in outgoing.indices where !outgoing[index].isEmpty {
            let batch = outgoing[index]
            outgoing[index] = []
            let sent = router.withServer(index) { server in server.loopForwarding?.deliver(batch, from: origin) }
            // That loop has stopped: it holds none of these devices any more.
            if !sent { answered(batch.map { LoopPushAck(token: $0.token, ack: PushAck(written: 0, queued: 0)) }) }
        }
    }

    /// Another loop's pushes for devices whose home this is; the counts go back to it.
    func deliver(_ batch: [LoopPush], from origin: Int) {
        let acks = batch.map { loopPush in
            let ack = LoopPushAck(token: loopPush.token, ack: server.logic.route(loopPush.push))
            server.carryOut()
            return ack
        }
        router.withServer(origin) { server in server.loopForwarding?.answered(acks) }
    }

    func answered(_ acks: [LoopPushAck]) {
        for answer in acks {
            guard var awaited = awaiting[answer.token] else { continue }
            awaited.ack.written &+= answer.ack.written
            awaited.ack.queued &+= answer.ack.queued
            awaited.remaining -= 1
            if awaited.remaining > 0 {
                awaiting[answer.token] = awaited
            } else {
                awaiting[answer.token] = nil
                server.answer(push: awaited.ack, correlation: awaited.correlation, peer: awaited.peer, startNs: awaited.startNs)
            }
        }
    }
}
