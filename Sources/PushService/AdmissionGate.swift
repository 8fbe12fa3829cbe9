import PushSession
import Synchronization

/// The connection caps of one service process (`AdmissionControl`), shared by every loop
/// that serves it: a gateway on several loops keeps one count of pending handshakes, of
/// them per address, and of admitted peers, so `--max-connections` and the pending caps
/// mean the same with one loop or many. Any thread; one lock per connection event (accept,
/// admission, close), never per frame. The connection cap is checked and the slot taken
/// in one step (`reserveSlot`), so two loops admitting at the last free slot at once
/// cannot both have it.
public final class AdmissionGate: Sendable {
    private let control: Mutex<AdmissionControl<ObjectIdentifier>>

    public init(limits: ServiceLimits) {
        control = Mutex(AdmissionControl(limits: limits))
    }

    var pendingCount: Int { control.withLock { $0.pendingCount } }
    var admittedCount: Int { control.withLock { $0.admittedCount } }
    func refusals(_ reason: ConnectionRefusal) -> Int { control.withLock { $0.refusals(reason) } }
    func isPending(_ peer: ObjectIdentifier) -> Bool { control.withLock { $0.isPending(peer) } }
    func reserveSlot() -> ConnectionRefusal? { control.withLock { $0.reserveSlot() } }
    func cancelReservation() { control.withLock { $0.cancelReservation() } }

    func arrived(_ peer: ObjectIdentifier, from address: String) -> ConnectionRefusal? {
        control.withLock { $0.arrived(peer, from: address) }
    }

    func admitted(_ peer: ObjectIdentifier) { control.withLock { $0.admitted(peer) } }
    func closed(_ peer: ObjectIdentifier) { control.withLock { $0.closed(peer) } }

    func refused(_ reason: ConnectionRefusal, now: Int64) -> Int? {
        control.withLock { $0.refused(reason, now: now) }
    }

    func dueLogLines(now: Int64) -> [(ConnectionRefusal, Int)] {
        control.withLock { $0.dueLogLines(now: now) }
    }
}
