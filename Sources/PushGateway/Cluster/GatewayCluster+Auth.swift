import Logging
import PushNATS

/// Every message between members is sealed (`ClusterSeal`); what arrives unsealed, forged,
/// moved from another subject, out of the time window or replayed is dropped and counted.
extension GatewayCluster {
    func publishSealed(_ subject: String, _ message: [UInt8]) throws(NATSError) {
        let nonce = nextNonce
        nextNonce &+= 1
        try connection.publish(subject, seal.seal(message, subject: subject, sender: localNode, sentAtMs: logic.wallClock(), nonce: nonce))
    }

    /// The message inside `message` if it is genuine and new; nil, counted, otherwise.
    func opened(_ message: NATSMessage) -> ClusterSeal.Opened? {
        do throws(ClusterAuthError) {
            let opened = try seal.open(message.data, subject: message.subject)
            try replayGuard.admit(sentAtMs: opened.sentAtMs, nonce: opened.nonce, nowMs: logic.wallClock())
            return opened
        } catch {
            rejected(error, message)
            return nil
        }
    }

    func rejected(_ error: ClusterAuthError, _ message: NATSMessage) {
        metrics.rejected(error)
        // A warning at most once a minute: a flood of forgeries must not become one of log lines.
        let nowMs = logic.monotonicNow()
        if let last = lastRejectionWarningMs, nowMs - last < 60_000 {
            logger.debug("dropped a cluster message that failed authentication", metadata: ["subject": "\(message.subject)", "reason": "\(error.rawValue)"])
            return
        }
        lastRejectionWarningMs = nowMs
        logger.warning("dropped a cluster message that failed authentication (a node of another build or deployment, a clock out of step, or a forgery); the others this minute are counted in securepush_gateway_cluster_messages_rejected_total",
                       metadata: ["subject": "\(message.subject)", "reason": "\(error.rawValue)"])
    }
}

extension GatewayCluster {
    /// A device's queue record that was not read: its pushes are not delivered, and the
    /// next write replaces it. A warning at most once a minute, like a refused message.
    func refusedQueueRecord(_ deviceID: String, _ error: ClusterQueueReadError) {
        let metadata: Logger.Metadata = ["device": "\(deviceID)", "reason": "\(error)"]
        guard let count = queueRecordRefusals.event(nowMs: logic.monotonicNow()) else {
            return logger.debug("refused a device's queue record in JetStream", metadata: metadata)
        }
        logger.warning("refused a device's queue record in JetStream (a node of another build or deployment, or a client writing the stream): its pushes are not delivered and the next write replaces it; counted in securepush_gateway_cluster_messages_rejected_total or _malformed_total",
                       metadata: metadata.merging(["times": "\(count)"]) { $1 })
    }
}

extension ClusterSeal {
    /// How far a message's time may be from the receiver's clock: the nodes' clocks are
    /// kept in step by NTP, well within it.
    static let windowMs: UInt64 = 30_000
}
