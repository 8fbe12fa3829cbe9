import CNats
import PushEventLoop

/// Requests in flight on one connection, each with a reply subject of its own
/// (`<inbox>.<n>`, one inbox per connection) and a sync subscription to it that the
/// server drops after one message.
///
/// Not one wildcard subscription for all replies: libnats' natsSubscription_NextMsg
/// swallows a "no responders" status message (503) and returns NATS_NO_RESPONDERS without
/// it, so on a shared subscription nobody could tell which request it answered. Polling
/// costs one NextMsg per request in flight after each read event.
struct NATSRequests {
    struct Pending {
        var subscription: OpaquePointer
        var completion: (Result<NATSMessage, NATSError>) -> Void
        var timer: LoopTimer?
    }

    var pending: [UInt64: Pending] = [:]
    var serial: UInt64 = 0
    var inbox: String?

    /// Every pending completion; their timers cancelled and subscriptions freed.
    mutating func removeAll() -> [(Result<NATSMessage, NATSError>) -> Void] {
        let taken = pending.values
        pending = [:]
        return taken.map { entry in
            entry.timer?.cancel()
            natsSubscription_Destroy(entry.subscription)
            return entry.completion
        }
    }
}

extension NATSConnection {
    /// Publishes `data` with a reply subject of its own and completes with the first reply,
    /// `.timeout` after `timeout`, `.noResponders` when the server reports nobody
    /// subscribed (a 503 status), or `.notConnected` if the connection closes first.
    /// Always completes on the loop, never inside this call.
    ///
    /// Fails with `.notConnected` at once while the link is down, unlike `publish`: a
    /// request left in the reconnect buffer would reach the server after its caller was
    /// told it failed, and a JetStream write the caller gave up on must not happen later.
    public func request(
        _ subject: String, _ data: [UInt8], headers: [(String, String)] = [], timeout: Duration,
        completion: @escaping (Result<NATSMessage, NATSError>) -> Void
    ) {
        do throws(NATSError) {
            try NATSNames.checkSubject(subject)
            for (name, value) in headers { try NATSNames.checkHeader(name, value) }
            guard let connection, isConnected else { throw .notConnected }
            let inbox = requests.inbox ?? newInbox()
            requests.inbox = inbox
            requests.serial &+= 1
            let token = requests.serial
            let replySubject = "\(inbox).\(token)"
            var made: OpaquePointer?
            try NATSConnection.check(natsConnection_SubscribeSync(&made, connection, replySubject))
            guard let subscription = made else { throw .library(status: -1, text: "natsConnection_SubscribeSync returned nothing") }
            _ = natsSubscription_SetPendingLimits(subscription, -1, -1)
            _ = natsSubscription_AutoUnsubscribe(subscription, 1)
            do throws(NATSError) {
                try publish(subject, data, reply: replySubject, headers: headers)
            } catch {
                natsSubscription_Destroy(subscription)
                throw error
            }
            let timer = loop.schedule(after: timeout) { [weak self] in
                self?.finishRequest(token, .failure(.timeout))
            }
            requests.pending[token] = NATSRequests.Pending(subscription: subscription, completion: completion, timer: timer)
        } catch {
            loop.schedule(after: .zero) { completion(.failure(error)) }
        }
    }

    /// Completes every request whose reply the last read event brought.
    func deliverReplies() {
        guard !requests.pending.isEmpty else { return }
        for token in requests.pending.keys {
            // A completion may close the connection or finish other requests.
            guard connection != nil, let entry = requests.pending[token] else { continue }
            var message: OpaquePointer?
            switch natsSubscription_NextMsg(&message, entry.subscription, 0) {
            case NATS_OK:
                guard let message else { continue }
                let copy = NATSMessage(copying: message)
                natsMsg_Destroy(message)
                finishRequest(token, .success(copy))
            case NATS_NO_RESPONDERS:
                finishRequest(token, .failure(.noResponders))
            default:
                continue  // NATS_TIMEOUT: no reply yet
            }
        }
    }

    /// Completes a request once: a late reply after a timeout (or the reverse) finds nothing.
    private func finishRequest(_ token: UInt64, _ result: Result<NATSMessage, NATSError>) {
        guard let entry = requests.pending.removeValue(forKey: token) else { return }
        entry.timer?.cancel()
        // Unsubscribes too if no reply came (a timeout), so a late one is not delivered.
        natsSubscription_Destroy(entry.subscription)
        entry.completion(result)
    }
}
