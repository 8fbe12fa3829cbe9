import PushClock
import PushSecurity
import PushService
import PushWire

/// A request the client sent to one of the harness's servers, as a case's intercept sees it.
struct HarnessRequest {
    var message: Message
    var correlation: UInt32
    /// The number of the connection it came on (1 for the first).
    var connection: Int
}

/// How the harness answers a request: as a faithful server would, or as the case says.
indirect enum HarnessAnswer {
    case faithful
    case reply(Message)
    /// A reply as bytes, for one no encoder would write.
    case rawReply([UInt8])
    case error(Status)
    /// This answer, after a delay.
    case later(ms: Int64, HarnessAnswer)
    /// No answer at all.
    case none
    /// No answer: the connection ends at once, without GOAWAY (a crash, a cut cable).
    case close
    /// GOAWAY with this status and `last_correlation` instead of an answer, then a close.
    case goaway(Status, lastCorrelation: UInt32, closeAfterMs: Int64)

    /// Carries `answer` out for `request`; `faithful` makes the reply a faithful server gives.
    static func carryOut<Handler>(_ answer: HarnessAnswer, _ request: HarnessRequest, server: HarnessServer<Handler>,
                                  peer: ServicePeer<Handler>, faithful: @escaping (Message) -> Message) {
        switch answer {
        case .faithful:
            server.respond(faithful(request.message), correlation: request.correlation, to: peer)
        case .reply(let message):
            server.respond(message, correlation: request.correlation, to: peer)
        case .rawReply(let bytes):
            server.respondRaw(bytes, to: peer)
        case .error(let status):
            server.respond(.error(ErrorReply(status: status, message: "from the conformance harness")), correlation: request.correlation, to: peer)
        case .later(let delay, let answer):
            server.host.loop.schedule(after: .milliseconds(delay)) { [weak server, weak peer] in
                guard let server, let peer, peer.connection.isOpen else { return }
                carryOut(answer, request, server: server, peer: peer, faithful: faithful)
            }
        case .none:
            break
        case .close:
            peer.connection.close()
        case .goaway(let status, let last, let closeAfterMs):
            server.goaway(status, lastCorrelation: last, to: peer, closeAfterMs: closeAfterMs)
        }
    }
}

/// Provider HELLOs at the harness's servers: the credential must verify for the server it
/// reached (7.1-4), and is recorded in the log like every frame, for 7.1-6.
enum HarnessCredentials {
    static func admitProvider(_ hello: Hello, audience: CredentialAudience, credential: HelloCredential?, serial: Int) -> Admission<Int> {
        guard let credential, let presented = hello.credential else {
            return .refuse(.authRequired, "a provider must send a credential (4.2-2)")
        }
        do {
            _ = try credential.verify(presented, for: audience, nowMs: Clocks.wallMilliseconds())
            return .admit(serial)
        } catch {
            return .refuse(.badCredentials, "the provider credential does not verify: \(error)")
        }
    }
}
