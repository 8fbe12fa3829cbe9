import PushEventLoop
import PushWire

/// One loop's part in a gateway of several: PUSHes whose targets live on other loops go
/// there, one batch per loop per turn, and the provider gets one PUSH_ACK summing every
/// loop's answer ([4.13-3]). A device target goes to its home loop only; a user or tag
/// target to every loop, each matching the devices whose home it is. Loop-confined.
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

    /// A provider's PUSH with its target set: delivered here to the devices whose home this
    /// loop is, sent to the other loops that may hold the rest.
    func push(_ push: Push, target: PushTarget, correlation: UInt32, peer: GatewayServer.Peer, startNs: UInt64) {
        var ack = PushAck(written: 0, queued: 0)
        let remote: Int
        let token = nextToken
        if case .device(let deviceID) = target {
            let home = placement.home(of: deviceID)
            guard home != placement.index else {
                let ack = server.logic.route(push)
                server.carryOut()
                return server.answer(push: ack, correlation: correlation, peer: peer, startNs: startNs)
            }
            remote = 1
            send(LoopPush(push: push, token: token), to: home)
        } else {
            ack = server.logic.route(push)
            server.carryOut()
            remote = placement.count - 1
            for index in 0..<placement.count where index != placement.index { send(LoopPush(push: push, token: token), to: index) }
        }
        nextToken &+= 1
        awaiting[token] = AwaitedAck(peer: peer, correlation: correlation, startNs: startNs, ack: ack, remaining: remote)
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
