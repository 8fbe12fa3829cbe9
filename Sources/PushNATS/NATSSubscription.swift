import CNats
import PushEventLoop

/// A subscription made by `NATSConnection.subscribe`. Loop-confined.
public final class NATSSubscription {
    public let subject: String
    private weak var owner: NATSConnection?
    private var subscription: OpaquePointer?
    private var handler: ((NATSMessage) -> Void)?

    init(connection: NATSConnection, subscription: OpaquePointer, subject: String, handler: @escaping (NATSMessage) -> Void) {
        owner = connection
        self.subscription = subscription
        self.subject = subject
        self.handler = handler
    }

    deinit { release() }

    /// True until `cancel()` or the connection's close.
    public var isActive: Bool { subscription != nil }

    /// Unsubscribes; no handler call follows, even for messages already received.
    /// Idempotent.
    public func cancel() {
        guard let subscription else { return }
        _ = natsSubscription_Unsubscribe(subscription)
        release()
        owner?.subscriptions.removeAll { $0 === self }
    }

    /// Frees libnats' subscription without unsubscribing (the connection is closing).
    func release() {
        guard let subscription else { return }
        self.subscription = nil
        handler = nil
        natsSubscription_Destroy(subscription)
    }

    /// Takes the messages libnats queued for this subscription and hands each to the
    /// handler; stops if the handler cancels the subscription or closes the connection.
    func drain() {
        while let subscription, let handler {
            var message: OpaquePointer?
            let status = natsSubscription_NextMsg(&message, subscription, 0)
            if status == NATS_SLOW_CONSUMER { continue }  // reported once, after drops
            guard status == NATS_OK, let message else { return }  // NATS_TIMEOUT: empty
            let copy = NATSMessage(copying: message)
            natsMsg_Destroy(message)
            handler(copy)
        }
    }
}
