import CNats
import PushEventLoop

extension NATSConnection {
    /// How a connection that libnats gave up on is opened again. libnats stops for good
    /// when a server refuses it twice in a row with the same authorization error, which a
    /// server restarting under load with its credentials not yet loaded can do once; a
    /// service that must not stay cut off until restarted opens a new libnats connection
    /// with the same servers, TLS and credentials, and makes its subscriptions again.
    ///
    /// The first attempt comes `first` after giving up; the delay doubles while reopened
    /// connections are refused too, up to `longest`, each jittered (between half and all
    /// of it) so that the nodes of a cluster refused together do not come back together.
    /// As in `init`, each new connection's first attempt is made on the loop.
    public struct ReopenSettings: Sendable, Equatable {
        public var first: Duration
        public var longest: Duration

        public init(first: Duration, longest: Duration) {
            self.first = first
            self.longest = max(first, longest)
        }

        public static let standard = ReopenSettings(first: .seconds(1), longest: .seconds(30))
    }

    /// Between libnats giving up and a reopened connection's first link.
    struct ReopenState {
        /// Reopened connections that failed since libnats first gave up.
        var failedAttempts = 0
        /// The delay before the next attempt, before jitter.
        var delay: Duration
        var timer: LoopTimer?
    }

    /// Reopened connections that failed since libnats gave up, while waiting to reopen.
    public var reopenAttempts: Int { reopen?.failedAttempts ?? 0 }

    /// Whether a new connection is to be opened, or is being opened, after libnats gave up.
    public var isReopening: Bool { reopen != nil }

    /// libnats gave up on the connection just ended: the next one is opened after the delay.
    func scheduleReopen() {
        guard let settings = settings.reopen else { return }
        var state = reopen ?? ReopenState(delay: settings.first)
        if reopen != nil {
            state.failedAttempts += 1
            state.delay = min(state.delay * 2, settings.longest)
        }
        let jittered = state.delay / 2 + state.delay / 2 * Double.random(in: 0...1)
        state.timer?.cancel()
        state.timer = loop.schedule(after: jittered) { [weak self] in self?.attemptReopen() }
        reopen = state
    }

    /// A reopened connection made its first link: the reason libnats gave up is gone.
    func reopened() {
        reopen?.timer?.cancel()
        reopen = nil
        gaveUpReason = nil
    }

    private func attemptReopen() {
        reopen?.timer = nil
        guard reopen != nil, connection == nil else { return }
        let link: Link
        do throws(NATSError) {
            link = try NATSConnection.open(on: loop, settings)
        } catch {
            // Refused at once: as if libnats had given up again.
            gaveUpReason = "\(error)"
            scheduleReopen()
            onEvent?(.gaveUp)
            return
        }
        driver = link.driver
        relay = link.relay
        connection = link.connection
        do throws(NATSError) {
            for subscription in subscriptions { try subscription.bind(to: link.connection) }
        } catch {
            connection = nil
            endLink(link.connection, failingWith: .notConnected, deferred: false)
            gaveUpReason = "cannot subscribe on the reopened connection: \(error)"
            scheduleReopen()
            onEvent?(.gaveUp)
            return
        }
        adopt(link)
    }
}
