import Foundation
import PushConformance
import PushTestSupport
import Testing

@Suite("The conformance catalogue", .ownThread)
struct CatalogueTests {
    let catalogue = ConformanceSuite.catalogue(ConformanceOptions())

    @Test("the built-in clause list is protocol/clauses.txt")
    func clauseListMatchesSpec() {
        #expect(Set(SpecClauses.all) == VectorFiles.clauseIDs)
        #expect(SpecClauses.all.count == Set(SpecClauses.all).count)
    }

    @Test("the client-side clauses are clauses of the spec, once each, in spec order")
    func clientSideClauses() {
        let position = Dictionary(uniqueKeysWithValues: SpecClauses.all.enumerated().map { ($1, $0) })
        let unknown = SpecClauses.clientSide.filter { position[$0] == nil }
        #expect(unknown.isEmpty, "not clauses of the spec: \(unknown)")
        let order = SpecClauses.clientSide.compactMap { position[$0] }
        #expect(order == order.sorted() && Set(order).count == order.count)
        for added in ["4.14-11", "4.14-12", "4.14-13", "5.8-1", "5.8-2", "5.8-3", "5.8-4", "5.8-5"] {
            #expect(SpecClauses.clientSide.contains(added), "\(added)")
        }
    }

    @Test("case ids are unique and every case names a clause of the spec")
    func casesNameClauses() {
        let ids = catalogue.map(\.id)
        #expect(Set(ids).count == ids.count, "duplicate ids: \(Dictionary(grouping: ids, by: { $0 }).filter { $0.value.count > 1 }.keys)")
        let unknown = catalogue.filter { !SpecClauses.all.contains($0.clause) }
        #expect(unknown.isEmpty, "\(unknown.map { "\($0.id): \($0.clause)" })")
    }

    @Test("clauses declared untestable have no case, and every other clause has one")
    func coverageIsHonest() {
        let covered = Set(catalogue.map(\.clause))
        let untestable = Set(SpecClauses.notTestableFromTheWire.keys)
        #expect(untestable.isSubset(of: Set(SpecClauses.all)))
        #expect(covered.isDisjoint(with: untestable), "\(covered.intersection(untestable))")
        let uncovered = SpecClauses.all.filter { !covered.contains($0) && !untestable.contains($0) }
        #expect(uncovered.isEmpty, "clauses with neither a case nor a reason: \(uncovered)")
    }

    @Test("every malformed and incomplete vector is its own case")
    func vectorCases() {
        let judged = VectorFiles.all.filter { if case .message = $0.expectation { false } else { true } }
        #expect(judged.count >= 60)
        let ids = Set(catalogue.map(\.id))
        let missing = judged.filter { !ids.contains("vector.\($0.name)") }
        #expect(missing.isEmpty, "\(missing.map(\.name))")
    }

    @Test("no vectors found: one SKIPPED placeholder that says where to point --vectors")
    func missingVectorsSkip() throws {
        var options = ConformanceOptions()
        options.vectorsDirectory = "/nonexistent/vectors"
        options.selection = ["vector."]
        let report = try ConformanceSuite.run(options)
        #expect(report.results.count == 1)
        #expect(report.results.first?.verdict == .skipped)
        #expect(report.results.first?.detail.contains("--vectors") == true)
    }

    @Test("CASE arguments select by id, id prefix, clause and clause prefix")
    func selection() throws {
        let byClause = try ConformanceSuite.select(catalogue, ["4.7"])
        #expect(!byClause.isEmpty && byClause.allSatisfy { $0.clause.hasPrefix("4.7-") })
        let bySection = try ConformanceSuite.select(catalogue, ["4.1"])
        #expect(bySection.allSatisfy { $0.clause.hasPrefix("4.1-") }, "4.1 must not select 4.10 to 4.15")
        let byPrefix = try ConformanceSuite.select(catalogue, ["gateway."])
        #expect(!byPrefix.isEmpty && byPrefix.allSatisfy { $0.id.hasPrefix("gateway.") })
        #expect(try ConformanceSuite.select(catalogue, ["hello.max-frame"]).map(\.id).contains("hello.max-frame"))
        #expect(throws: ConformanceSuite.SelectionError.self) { try ConformanceSuite.select(catalogue, ["no-such-case"]) }
    }

    @Test("without services every case SKIPs, none FAILs, and nothing counts as covered")
    func nothingToTest() throws {
        let report = try ConformanceSuite.run(ConformanceOptions())
        #expect(report.results.allSatisfy { $0.verdict == .skipped })
        #expect(report.coveredClauses.isEmpty)
        #expect(report.notCovered.count == SpecClauses.all.count)
        #expect(!report.hasFailures)
    }
}
