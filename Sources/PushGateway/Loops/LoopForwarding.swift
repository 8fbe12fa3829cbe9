import PushEventLoop
import PushWire

/// One loop's part in a gateway of several: carries out the logic's `.forward(to: .loop)`
/// (a device target goes to its home loop only; a user or tag target to every loop, each
/// matching the devices whose home it is), one batch per loop per turn, and gathers each
/// loop's counts into the PUSH's tally, which answers the provider once every part is in
/// ([4.13-3]). Loop-confined.
final class LoopForwarding {
    let placement: LoopPlacement
    let router: GatewayLoopRouter
    private unowned let server: GatewayServer
    /// Pushes for other loops and answers to them, each sent at the end of the turn.
    @exclusivity(unchecked) private var pushes: TurnBatches<Int, LoopPush>!
    @exclusivity(unchecked) private var answers: TurnBatches<Int, LoopPushAck>!
    /// The tallies of PUSHes sent to other loops, by the token their answer names.
    @exclusivity(unchecked) private var awaiting: [UInt64: PushTally] = [:]
    @exclusivity(unchecked) private var nextToken: UInt64 = 0

    init(placement: LoopPlacement, router: GatewayLoopRouter, loop: EventLoop, server: GatewayServer) {
        self.placement = placement
        self.router = router
        self.server = server
        pushes = TurnBatches(loop: loop) { [unowned self] index, batch in send(batch, to: index) }
        answers = TurnBatches(loop: loop) { [unowned self] index, acks in
            router.withServer(index) { server in server.loopForwarding?.answered(acks) }
        }
    }

    /// Sends `push` to loop `index`, for the devices whose home it is; its counts join `tally`.
    func forward(_ push: Push, to index: Int, tally: PushTally) {
        tally.begin()
        awaiting[nextToken] = tally
        pushes.append(LoopPush(push: push, token: nextToken), for: index)
        nextToken &+= 1
    }

    private func send(_ batch: [LoopPush], to index: Int) {
        let origin = placement.index
        let sent = router.withServer(index) { server in server.loopForwarding?.deliver(batch, from: origin) }
        // That loop has stopped: it holds none of these devices any more.
        if !sent { answered(batch.map { LoopPushAck(token: $0.token, ack: PushAck(written: 0, queued: 0)) }) }
    }

    /// Another loop's pushes for devices whose home this is; the counts go back to it, at
    /// once for what is decided now, at the end of a later turn for what waits (a cluster
    /// node's forwards and queue writes).
    func deliver(_ batch: [LoopPush], from origin: Int) {
        for loopPush in batch {
            let token = loopPush.token
            var tally: PushTally?
            let ack = server.route(loopPush.push) {
                if tally == nil { tally = PushTally { [answers] ack in answers?.append(LoopPushAck(token: token, ack: ack), for: origin) } }
                return tally
            }
            server.carryOut()
            if let tally {
                tally.add(ack)
                tally.seal()
            } else {
                answers.append(LoopPushAck(token: token, ack: ack), for: origin)
            }
        }
        answers.sendPending()
    }

    func answered(_ acks: [LoopPushAck]) {
        for answer in acks {
            guard let tally = awaiting.removeValue(forKey: answer.token) else { continue }
            tally.add(answer.ack)
            tally.end()
        }
    }
}
