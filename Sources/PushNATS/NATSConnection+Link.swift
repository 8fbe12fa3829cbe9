import CNats
import Glibc
import PushClock
import PushEventLoop

/// Opening one libnats connection, the first or a reopened one, and making it this
/// connection's: its options, socket driver and event relay.
extension NATSConnection {
    /// What a libnats connection is opened with.
    struct Settings {
        var servers: [String]
        var name: String
        var connectTimeout: Duration
        var ping: PingSettings
        var security: NATSSecurity
        var reopen: ReopenSettings?
    }

    /// A libnats connection just opened, with its own driver and relay.
    struct Link {
        var connection: OpaquePointer
        var driver: NATSSocketDriver
        var relay: NATSEventRelay
        /// Connected inside natsConnection_Connect: libnats makes no connected callback.
        var connectedAtOnce: Bool
    }

    /// Opens a libnats connection: the first attempt happens here, later ones in the background.
    static func open(on loop: EventLoop, _ settings: Settings) throws(NATSError) -> Link {
        let driver = NATSSocketDriver(loop: loop)
        let relay = NATSEventRelay(handle: loop.handle)
        var options: OpaquePointer?
        try NATSConnection.check(natsOptions_Create(&options))
        guard let options else { throw .library(status: -1, text: "natsOptions_Create returned nothing") }
        defer { natsOptions_Destroy(options) }
        // Unmanaged for C interop, not speed: libnats' callbacks get the relay as their closure
        // pointer. Released by the closed callback, the last one libnats makes (on its thread).
        let relayContext = Unmanaged.passRetained(relay).toOpaque()
        var relayHandedOver = false
        defer { if !relayHandedOver { Unmanaged<NATSEventRelay>.fromOpaque(relayContext).release() } }
        try NATSConnection.configure(options, servers: settings.servers, name: settings.name, connectTimeout: settings.connectTimeout,
                                     ping: settings.ping, driver: driver.context, relay: relayContext)
        try settings.security.apply(to: options)
        var made: OpaquePointer?
        let status = natsConnection_Connect(&made, options)
        guard status == NATS_OK || status == NATS_NOT_YET_CONNECTED, let made else {
            let error = NATSError.library(status)
            driver.stop()
            throw error
        }
        relayHandedOver = true
        return Link(connection: made, driver: driver, relay: relay, connectedAtOnce: status == NATS_OK)
    }

    /// Makes `link` this connection's: its events and reads come here from now on.
    func adopt(_ link: Link) {
        link.relay.connection = self
        link.driver.afterRead = { [weak self] in
            guard let self else { return }
            // Only a live link's reads count: libnats closing a dead socket raises one too.
            if self.isConnected { self.lastInboundMs = Clocks.monotonicMilliseconds() }
            self.deliverMessages()
        }
        link.driver.onLoopShutdown = { [weak self] in self?.loopShutDown() }
        if link.connectedAtOnce {
            // libnats calls the connected callback only for a connection made in the background.
            let relay = link.relay
            loop.schedule(after: .zero) { [weak self, weak relay] in
                guard let self, let relay, relay === self.relay else { return }
                self.deliver(.connected)
            }
        }
    }

    fileprivate static func configure(
        _ options: OpaquePointer, servers: [String], name: String, connectTimeout: Duration, ping: PingSettings,
        driver: UnsafeMutableRawPointer, relay: UnsafeMutableRawPointer
    ) throws(NATSError) {
        try configureServers(options, servers: servers, name: name, timeout: connectTimeout)
        // A node never wants the messages it published itself.
        try check(natsOptions_SetNoEcho(options, true))
        try check(natsOptions_SetMaxReconnect(options, -1))
        try check(natsOptions_SetReconnectWait(options, 250))
        try check(natsOptions_SetReconnectBufSize(options, reconnectBufferBytes))
        try check(natsOptions_SetPingInterval(options, milliseconds(ping.interval)))
        try check(natsOptions_SetMaxPingsOut(options, max(1, ping.maxOutstanding)))
        // Without it libnats starts a flusher thread that signals writes from its own
        // thread; with it, a publish asks the loop for writability right away and the loop
        // writes everything buffered in that iteration at once.
        try check(natsOptions_SetSendAsap(options, true))
        try check(natsOptions_SetEventLoop(options, driver, natsDriverAttach, natsDriverRead, natsDriverWrite, natsDriverDetach))
        // With a connected callback, a failed first connect returns NATS_NOT_YET_CONNECTED
        // and retries in the background (without one, natsConnection_Connect retries inline).
        try check(natsOptions_SetRetryOnFailedConnect(options, true, natsRelayConnected, relay))
        try check(natsOptions_SetDisconnectedCB(options, natsRelayDisconnected, relay))
        try check(natsOptions_SetReconnectedCB(options, natsRelayReconnected, relay))
        try check(natsOptions_SetClosedCB(options, natsRelayClosed, relay))
        // Asynchronous errors (a slow consumer) would otherwise be printed to stderr.
        try check(natsOptions_SetErrorHandler(options, natsRelayError, nil))
    }
}
