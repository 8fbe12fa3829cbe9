import CNats
import PushEventLoop

/// A subscription made by `NATSConnection.subscribe`. Loop-confined.
///
/// Outlives the libnats connection it was made on when the connection reopens itself
/// (`NATSConnection.ReopenSettings`): it is made again, with the same handler, on the next one.
public final class NATSSubscription {
    public let subject: String
    private weak var owner: NATSConnection?
    /// libnats' subscription; nil while the connection waits to reopen.
    private var subscription: OpaquePointer?
    private var handler: ((NATSMessage) -> Void)?

    init(connection: NATSConnection, subject: String, handler: @escaping (NATSMessage) -> Void) {
        owner = connection
        self.subject = subject
        self.handler = handler
    }

    deinit { release() }

    /// True until `cancel()` or the connection's close.
    public var isActive: Bool { handler != nil }

    /// Unsubscribes; no handler call follows, even for messages already received.
    /// Idempotent.
    public func cancel() {
        guard handler != nil else { return }
        if let subscription { _ = natsSubscription_Unsubscribe(subscription) }
        release()
        owner?.subscriptions.removeAll { $0 === self }
    }

    /// Subscribes on `connection`, a libnats connection just opened (or opened again).
    func bind(to connection: OpaquePointer) throws(NATSError) {
        var made: OpaquePointer?
        try NATSConnection.check(natsConnection_SubscribeSync(&made, connection, subject))
        guard let made else { throw .library(status: -1, text: "natsConnection_SubscribeSync returned nothing") }
        // Messages wait in the subscription only until the end of the read event that
        // brought them, so a limit would only drop bursts.
        _ = natsSubscription_SetPendingLimits(made, -1, -1)
        subscription = made
    }

    /// Frees libnats' subscription without unsubscribing (its connection is closing) and
    /// keeps the handler for the next connection.
    func unbind() {
        guard let subscription else { return }
        self.subscription = nil
        natsSubscription_Destroy(subscription)
    }

    /// `unbind()`, and no handler call ever follows.
    func release() {
        unbind()
        handler = nil
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
