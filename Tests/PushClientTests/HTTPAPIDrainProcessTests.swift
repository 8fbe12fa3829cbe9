import Foundation
import Synchronization
import Testing
import PushTestSupport

/// The store's HTTP API through a graceful stop, as processes: what a client sees of a
/// SIGTERM in the middle of its POSTs.
@Suite("HTTP provider API drain, as processes", .ownThread)
struct HTTPAPIDrainProcessTests {
    /// What one POST came to, by its Idempotency-Key.
    enum Outcome: Equatable {
        case created
        case shuttingDown
        /// Another status, with the body.
        case other(Int, String)
        /// No answer: the connection ended (or failed) first.
        case unanswered
    }

    @Test("[5.5-1] [4.17-1] [4.17-5] SIGTERM while eight keep-alive clients POST: every POST the store read is answered, 201 for each committed one and 503 SHUTTING_DOWN with Connection: close for the rest; no committed one goes unanswered")
    func sigtermAnswersEveryPostRead() throws {
        let setup = try HTTPAPIProcessTests.Setup()
        let token = try setup.token("billing")
        let port = setup.httpPort
        let outcomes = Mutex<[(key: String, outcome: Outcome)]>([])
        let closeHeaders = Mutex<[String]>([])
        let senders = DispatchGroup()
        for client in 0..<8 {
            DispatchQueue.global().async(group: senders) {
                // Keep-alive: one connection until an answer closes it; then a new one, which
                // the draining store answers 503 (or no longer accepts).
                var connection = try? HTTPTestConnection(port: port, timeoutMs: 10_000)
                for index in 0..<100_000 {
                    guard let http = connection else { return }
                    let key = "c\(client)-\(index)"
                    let json = #"{"recipient":"alice","text":"message \#(key)"}"#
                    guard let answer = try? http.post("/v1/messages", json: json, token: token, headers: [("Idempotency-Key", key)]) else {
                        outcomes.withLock { $0.append((key, .unanswered)) }
                        return
                    }
                    let code = (try? answer.json())?["code"] as? String
                    let outcome: Outcome = switch (answer.status, code) {
                    case (201, _): .created
                    case (503, "SHUTTING_DOWN"): .shuttingDown
                    default: .other(answer.status, answer.text)
                    }
                    outcomes.withLock { $0.append((key, outcome)) }
                    if outcome == .shuttingDown { closeHeaders.withLock { $0.append(answer.headers["connection"] ?? "") } }
                    if outcome != .created { return }
                    if answer.headers["connection"]?.lowercased() == "close" {
                        connection = try? HTTPTestConnection(port: port, timeoutMs: 10_000)
                    }
                }
            }
        }
        #expect(try waitUntil(timeoutSeconds: 60) { outcomes.withLock { $0.count } >= 300 })
        #expect(setup.store.terminate() == 0, "the store exits 0 after its drain")
        #expect(senders.wait(timeout: .now() + 30) == .success)
        let seen = outcomes.withLock { $0 }
        #expect(!seen.contains { if case .other = $0.outcome { true } else { false } },
                "\(seen.filter { if case .other = $0.outcome { true } else { false } }.prefix(3))")
        #expect(closeHeaders.withLock { $0 }.allSatisfy { $0.lowercased() == "close" }, "a 503 while draining closes its connection")

        // Which POSTs were committed: after a restart, a retry with the same key replays
        // exactly those ([4.17-5]).
        let restarted = try ServiceProcess(["store", "--data-dir", setup.deployment.directory, "--gateway", "127.0.0.1:\(setup.gateway.port)",
                                            "--http", "127.0.0.1:0"])
        defer { _ = restarted.terminate() }
        let http = try HTTPTestConnection(port: try #require(restarted.announcedHTTPPort))
        var committedUnanswered: [String] = [], answeredNotCommitted: [String] = []
        for (key, outcome) in seen {
            let json = #"{"recipient":"alice","text":"message \#(key)"}"#
            let retry = try http.post("/v1/messages", json: json, token: token, headers: [("Idempotency-Key", key)])
            let replayed = try retry.json()["replayed"] as? Bool == true
            switch outcome {
            case .created where !replayed: answeredNotCommitted.append(key)
            case .shuttingDown where replayed, .unanswered where replayed: committedUnanswered.append(key)
            default: break
            }
        }
        #expect(committedUnanswered.isEmpty, "committed, and the client never got its 201: \(committedUnanswered)")
        #expect(answeredNotCommitted.isEmpty, "answered 201, and not committed: \(answeredNotCommitted)")
        let unanswered = seen.filter { $0.outcome == .unanswered }.count, refused = seen.filter { $0.outcome == .shuttingDown }.count
        print("drain: \(seen.count) POSTs, \(unanswered) unanswered (not read), \(refused) answered 503")
    }
}
