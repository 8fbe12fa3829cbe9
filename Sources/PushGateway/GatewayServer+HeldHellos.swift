import PushClock
import PushEventLoop
import PushService
import PushSession

/// A device's HELLO whose registration the registry does not hold yet, though it was
/// issued moments ago: the tool that issued it recorded the enrolment first, and the store
/// tells this gateway within a second ([4.16-8]). Held rather than refused, since a device
/// refused BAD_CREDENTIALS should not come back on its own ([7.4-7]).
struct HeldHello {
    weak var peer: GatewayServer.Peer?
    let credential: [UInt8]
    let deadlineMs: Int64
}

extension GatewayServer {
    /// How often held HELLOs are checked against the registry again.
    static let heldHelloRecheck: Duration = .milliseconds(50)

    func hold(_ peer: Peer, credential: [UInt8]) {
        let deadline = Clocks.monotonicMilliseconds() + GatewayLogic.unheardHoldMs
        heldHellos.append(HeldHello(peer: peer, credential: credential, deadlineMs: deadline))
        guard heldHelloTimer == nil else { return }
        heldHelloTimer = host.loop.schedule(after: GatewayServer.heldHelloRecheck, repeating: true) { [weak self] in
            self?.recheckHeldHellos()
        }
    }

    /// Admits each held HELLO whose enrolment has arrived, refuses each whose registration
    /// is now revoked or whose time is up ([7.4-4]), and forgets those whose peer left.
    func recheckHeldHellos() {
        let now = Clocks.monotonicMilliseconds()
        let held = heldHellos
        heldHellos.removeAll(keepingCapacity: true)
        for entry in held {
            guard let peer = entry.peer, peer.connection.isOpen else { continue }
            let decided = logic.admitDevice(entry.credential, mayWait: now < entry.deadlineMs)
            if case .unheard = decided {
                heldHellos.append(entry)
            } else {
                host.decide(peer, admission(decided))
            }
        }
        if heldHellos.isEmpty {
            heldHelloTimer?.cancel()
            heldHelloTimer = nil
        }
    }
}
