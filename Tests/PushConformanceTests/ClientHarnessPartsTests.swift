@testable import PushConformance
import PushWire
import Testing

@Suite("The client harness's parts")
struct ClientHarnessPartsTests {
    @Test("a command template splits like plain shell words and keeps a placeholder's value one argument")
    func commandLine() throws {
        let line = try ClientCommandLine(#"/bin/echo --state '{state}' "a b" c\ d --gw={gateway}"#)
        #expect(line.words == ["/bin/echo", "--state", "{state}", "a b", "c d", "--gw={gateway}"])
        #expect(line.usedPlaceholders == ["state", "gateway"])
        let arguments = try line.arguments(["state": "/tmp/with space", "gateway": "127.0.0.1:9"])
        #expect(arguments == ["/bin/echo", "--state", "/tmp/with space", "a b", "c d", "--gw=127.0.0.1:9"])
    }

    @Test("a bad template is refused with the reason", arguments: [
        ("", ClientCommandLine.Problem.empty),
        ("mydevice 'open", .unclosedQuote),
        ("mydevice {gatway}", .unknownPlaceholder("gatway")),
    ])
    func badTemplates(template: String, problem: ClientCommandLine.Problem) {
        #expect(throws: problem) { try ClientCommandLine(template) }
    }

    @Test("a program without a slash is looked up on PATH")
    func programOnPath() throws {
        let arguments = try ClientCommandLine("sh -c true").arguments([:])
        #expect(arguments[0].hasSuffix("/sh"))
        #expect(throws: ClientCommandLine.Problem.executableNotFound("no-such-program-securepush")) {
            try ClientCommandLine("no-such-program-securepush").arguments([:])
        }
    }

    @Test("device lines in the contract's form are read, anything else is not")
    func deviceLines() {
        let id = PayloadID(high: 0x0123_4567_89ab_cdef, low: 1)
        #expect(DeviceOutputLine("SHOWN \(id.hex) PAYLOAD 68690a", atMs: 5)
                == .shown(ShownNotification(id: id, content: .payload([0x68, 0x69, 0x0a]), atMs: 5)))
        #expect(DeviceOutputLine("SHOWN \(id.hex) PAYLOAD", atMs: 5) == .shown(ShownNotification(id: id, content: .payload([]), atMs: 5)))
        #expect(DeviceOutputLine("SHOWN \(id.hex) GENERIC", atMs: 5) == .shown(ShownNotification(id: id, content: .generic, atMs: 5)))
        for bad in ["SHOWN \(id.hex.uppercased()) GENERIC", "SHOWN \(id.hex) GENERIC x", "SHOWN \(id.hex) PAYLOAD 6", "SHOWN \(id.hex) PAYLOAD ",
                    "12:00 \(id.hex) hello", "SHOWN 0123 GENERIC", ""] {
            #expect(DeviceOutputLine(bad, atMs: 0) == .unreadable(bad), "\(bad)")
        }
    }

    @Test("backoff: growing jittered waits pass; waits that do not grow, or come too soon, fail")
    func backoffJudge() {
        func times(_ waits: [Int64]) -> [Int64] { waits.reduce(into: [0]) { $0.append($0.last! + $1) } }
        #expect(Backoff.problem(times([60, 230, 310, 900, 1_250, 3_100]), over: 6_500) == nil)
        #expect(Backoff.problem(times([100, 100, 100, 100, 100, 100]), over: 6_500) != nil)
        #expect(Backoff.problem(times([1_000, 1_000, 1_000, 1_000, 1_000]), over: 6_500) != nil)
        // A first wait stretched by a client slow to notice the close, the rest growing.
        #expect(Backoff.problem(times([580, 124, 220, 500, 900]), over: 6_500) == nil)
        #expect(Backoff.problem([0], over: 6_500) != nil)
        #expect(Backoff.looksExact([100, 200, 400, 800, 1_600]))
        #expect(Backoff.looksExact([500, 500, 500, 500]))
        #expect(!Backoff.looksExact([60, 230, 310, 900, 1_250]))
    }

    @Test("field scanning finds the order of tags and a padded length")
    func fieldScan() {
        let ordered = RawFrame.field(0x12, [1]) + RawFrame.field(0x15, [2, 3])
        #expect(FieldScan.tags(ordered) == [0x12, 0x15])
        #expect(FieldScan.paddedLength(ordered) == nil)
        #expect(FieldScan.paddedLength(RawFrame.field(0x12, [1], lengthBytes: 2)) == 0x12)
        #expect(FieldScan.tags([0x12, 0x05, 1]) == nil)
    }

    @Test("the clauses each kind of client is graded on are client-side clauses of the spec")
    func clauseLists() {
        #expect(Set(SpecClauses.deviceSide + SpecClauses.providerSide).isSubset(of: Set(SpecClauses.clientSide)))
    }

    @Test("client case ids are unique and every case judges a clause that binds that kind of client")
    func clientCatalogue() {
        for kind in ClientKind.allCases {
            let cases = ClientSuite.catalogue(kind)
            #expect(Set(cases.map(\.id)).count == cases.count)
            let foreign = cases.filter { !SpecClauses.all.contains($0.clause) || !SpecClauses.bindsClient($0.clause, kind) }
            #expect(foreign.isEmpty, "\(foreign.map { "\($0.id): \($0.clause)" })")
        }
    }
}
