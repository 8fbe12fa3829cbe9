import PushConformance
import PushTestSupport
import Testing

@Suite("The conformance cases of PUSH's user and once against this build's gateway", .ownThread)
struct UserAndOnceCasesTests {
    /// The cases of 4.13-11 and 4.13-12 against a gateway on `gatewayLoops` loops.
    static func run(gatewayLoops: Int) throws -> [CaseResult] {
        let services = try OwnServices(gatewayLoops: gatewayLoops)
        var options = services.options
        options.selection = ["4.13-11", "4.13-12"]
        return try ConformanceSuite.run(options).results
    }

    @Test("[4.13-11] [4.13-12] each case passes, on one loop and on four", arguments: [1, 4])
    func casesPass(gatewayLoops: Int) throws {
        let results = try Self.run(gatewayLoops: gatewayLoops)
        #expect(Set(results.map(\.id)) == ["gateway.push-user", "gateway.push-once", "gateway.push-once-queued"])
        for result in results {
            #expect(result.verdict == .pass, "\(result.id): \(result.verdict) \(result.detail)")
        }
    }
}
