import Logging
import PushClock
import PushNATS
import PushService
import PushWire

/// How a node knows its NATS link answers, and makes sure no queue in JetStream is left
/// behind for a device connected to it after NATS, or this node's link to it, was away:
/// the queues of every device here are taken after a reconnect, a take that failed is
/// tried again, and a node that was taken for dead is told to take the queues written for
/// its devices meanwhile.
extension GatewayCluster {
    /// Connected to NATS, the link answering, with the queue stream in place.
    var isReady: Bool { notReadyReason == nil }

    /// Why /readyz says not ready, if it does.
    var notReadyReason: String? {
        if connection.isReopening {
            let reason = connection.gaveUpReason ?? "refused"
            return "the NATS client gave up (\(reason)); opening a new connection (\(connection.reopenAttempts) failed so far)"
        }
        if !connection.isConnected { return "no connection to the cluster's NATS server" }
        if !linkIsUp { return "the cluster's NATS server does not answer" }
        if !streamReady { return "setting up the JetStream stream for offline queues" }
        return nil
    }

    /// Connected, and the socket brought something (a PONG at least, one a ping interval)
    /// lately: a link cut without a reset looks connected to libnats until its pings fail.
    var linkIsUp: Bool {
        guard connection.isConnected else { return false }
        let silentMs = Clocks.monotonicMilliseconds() - connection.lastInboundMs
        return silentMs <= 2 * Int64(configuration.natsPing.interval / .milliseconds(1))
    }

    /// libnats gave up on the NATS connection; it opens a new one after a backoff, and the
    /// reconnect that follows recovers as any other (presence, queues taken).
    func natsGaveUp() {
        let nowMs = Clocks.monotonicMilliseconds()
        let metadata: Logger.Metadata = ["node": "\(localNode)", "reason": "\(connection.gaveUpReason ?? "")",
                                         "failed_reopens": "\(connection.reopenAttempts)"]
        if gaveUpAtMs == nil {
            gaveUpAtMs = nowMs
            _ = reopenLog.event(nowMs: nowMs)
            logger.error("the NATS client gave up on the cluster's NATS server; not ready, opening a new connection after a backoff",
                         metadata: metadata)
        } else if let count = reopenLog.event(nowMs: nowMs) {
            var metadata = metadata
            metadata["times"] = "\(count)"
            logger.warning("the NATS server refused a new connection too; trying again after a longer backoff", metadata: metadata)
        } else {
            logger.debug("the NATS server refused a new connection too", metadata: metadata)
        }
    }

    /// Connected: if after giving up, the new connection is up.
    func natsReopened() {
        guard let since = gaveUpAtMs else { return }
        gaveUpAtMs = nil
        reopenLog = LogThrottle(intervalMs: 60_000)
        logger.info("a new NATS connection is up after the NATS client gave up",
                    metadata: ["node": "\(localNode)", "after_ms": "\(Clocks.monotonicMilliseconds() - since)"])
    }

    static let firstTakeRetry: Duration = .seconds(1)
    static let longestTakeRetry: Duration = .seconds(30)

    /// A take failed for a device that may still be here: tried again after a delay that
    /// doubles while takes keep failing (JetStream away for long is not asked every second
    /// for every device); while the link is down, only when it answers again.
    func retryTake(_ deviceID: String) {
        guard takeRetries[ExactName(deviceID)] == nil, logic.devices[ExactName(deviceID)]?.link != nil else { return }
        let delay = takeRetryDelays[ExactName(deviceID)] ?? GatewayCluster.firstTakeRetry
        takeRetryDelays[ExactName(deviceID)] = min(delay * 2, GatewayCluster.longestTakeRetry)
        takeRetries[ExactName(deviceID)] = loop.schedule(after: delay) { [weak self] in
            guard let self else { return }
            self.takeRetries[ExactName(deviceID)] = nil
            guard self.logic.devices[ExactName(deviceID)]?.link != nil else {
                self.takeRetryDelays[ExactName(deviceID)] = nil
                return
            }
            if self.linkIsUp {
                self.take(deviceID)
            } else {
                self.retryTake(deviceID)
            }
        }
    }

    func forgetTakeRetry(_ deviceID: String) {
        takeRetries.removeValue(forKey: ExactName(deviceID))?.cancel()
        takeRetryDelays[ExactName(deviceID)] = nil
    }

    /// After a reconnect: the queue of every device connected here, which other nodes may
    /// have written while they could not see it here.
    func takeEveryLocalQueue() {
        let connected = logic.devices.compactMap { $0.value.link != nil ? $0.key.text : nil }
        guard !connected.isEmpty else { return }
        logger.info("taking the queues of the devices connected here after reconnecting",
                    metadata: ["node": "\(localNode)", "devices": "\(connected.count)"])
        for deviceID in connected { take(deviceID) }
    }

    /// A queue was written for a device no node was known to hold.
    func wroteUnplacedQueue(of deviceID: String) {
        unplacedQueues.wrote(deviceID, atWallMs: logic.wallClock())
    }

    /// A presence batch from `node` was applied: the devices it shows connected there whose
    /// queue this node wrote without knowing of them are that node's to take.
    func askToTakeUnplaced(_ changes: [PresenceChange], from node: String) {
        guard !unplacedQueues.isEmpty else { return }
        let toTake = changes.filter { change in
            change.online && directory.node(of: change.deviceID) == node
                && unplacedQueues.holderMustTake(change.deviceID, connectedSince: change.stamp)
        }.map(\.deviceID)
        guard !toTake.isEmpty else { return }
        try? publishSealed(subjects.takes(for: node), TakeNotice(deviceIDs: toTake).encoded())
    }
}
