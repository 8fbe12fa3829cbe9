import CNats
import PushEventLoop

/// Carries libnats' connection callbacks, which run on its own callback thread, to the
/// loop. libnats holds one retain on the relay, given up by the closed callback: the last
/// callback it makes, possibly after the connection object is gone.
///
/// `@unchecked Sendable`, for C interop (libnats calls back on its own threads), not speed:
/// `connection` is read and written on the loop thread only; the callbacks touch nothing
/// but the thread-safe `handle`.
final class NATSEventRelay: @unchecked Sendable {
    private let handle: LoopHandle
    weak var connection: NATSConnection?

    init(handle: LoopHandle) {
        self.handle = handle
    }

    func post(_ event: NATSConnectionEvent) {
        handle.execute { [self] in connection?.deliver(event) }
    }
}

private func relay(_ closure: UnsafeMutableRawPointer?) -> NATSEventRelay? {
    guard let closure else { return nil }
    return Unmanaged<NATSEventRelay>.fromOpaque(closure).takeUnretainedValue()
}

func natsRelayConnected(_ connection: OpaquePointer?, _ closure: UnsafeMutableRawPointer?) {
    relay(closure)?.post(.connected)
}

func natsRelayDisconnected(_ connection: OpaquePointer?, _ closure: UnsafeMutableRawPointer?) {
    relay(closure)?.post(.disconnected)
}

func natsRelayReconnected(_ connection: OpaquePointer?, _ closure: UnsafeMutableRawPointer?) {
    relay(closure)?.post(.reconnected)
}

func natsRelayClosed(_ connection: OpaquePointer?, _ closure: UnsafeMutableRawPointer?) {
    guard let closure else { return }
    relay(closure)?.post(.closed)
    Unmanaged<NATSEventRelay>.fromOpaque(closure).release()
}

func natsRelayError(_ connection: OpaquePointer?, _ subscription: OpaquePointer?, _ status: natsStatus, _ closure: UnsafeMutableRawPointer?) {
    // Pending limits are off, so the one asynchronous error libnats reports (a slow
    // consumer) cannot happen; anything else surfaces through the calls themselves.
}
