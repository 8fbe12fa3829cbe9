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
    private var pushes: LoopBatches<LoopPush>!
    private var answers: LoopBatches<LoopPushAck>!
    /// The tallies of PUSHes sent to other loops, by the token their answer names.
    private var awaiting = TokenTable<PushTally>()

    init(placement: LoopPlacement, router: GatewayLoopRouter, loop: EventLoop, server: GatewayServer) {
        self.placement = placement
        self.router = router
        self.server = server
        pushes = LoopBatches(loop: loop, count: placement.count) { [unowned self] index, batch in send(batch, to: index) }
        answers = LoopBatches(loop: loop, count: placement.count) { [unowned self] index, acks in
            router.withServer(index) { server in server.loopForwarding?.answered(acks) }
        }
    }

    /// Sends `push` to loop `index`, for the devices whose home it is; its counts join `tally`.
    func forward(_ push: Push, to index: Int, tally: PushTally) {
        tally.begin()
        pushes.append(LoopPush(push: push, token: awaiting.insert(tally)), for: index)
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
            let share = server.routeShare(tally: { PushTally(.loop(self, origin: origin, token: token)) }) {
                server.logic.route(loopPush.push)
            }
            if let tally = share.tally {
                tally.add(share.ack)
                tally.seal()
            } else {
                answers.append(LoopPushAck(token: token, ack: share.ack), for: origin)
            }
        }
        answers.sendPending()
    }

    /// The counts of a share this loop took, for the loop that sent it.
    func answer(_ ack: LoopPushAck, to origin: Int) {
        answers.append(ack, for: origin)
    }

    func answered(_ acks: [LoopPushAck]) {
        for answer in acks {
            guard let tally = awaiting.remove(answer.token) else { continue }
            tally.add(answer.ack)
            tally.add(unreached: answer.unreached)
            tally.end()
        }
    }
}

/// Values under consecutive tokens, most taken back in about the order given: a window of
/// slots from the oldest token still held, so that neither giving nor taking hashes.
struct TokenTable<Value> {
    private var slots: [Value?] = []
    /// Slots before `head` were taken; `slots[head]` holds token `firstToken`.
    private var head = 0
    private var firstToken: UInt64 = 0

    /// Holds `value`; returns its token.
    mutating func insert(_ value: Value) -> UInt64 {
        slots.append(value)
        return firstToken &+ UInt64(slots.count - 1 - head)
    }

    /// The value under `token`, which is then free; nil if none is held.
    mutating func remove(_ token: UInt64) -> Value? {
        let offset = token &- firstToken
        guard offset < UInt64(slots.count - head) else { return nil }
        let index = head + Int(offset)
        guard let value = slots[index] else { return nil }
        slots[index] = nil
        while head < slots.count, slots[head] == nil {
            head += 1
            firstToken &+= 1
        }
        if head == slots.count {
            slots.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64, head * 2 >= slots.count {
            slots.removeSubrange(0..<head)
            head = 0
        }
        return value
    }
}
