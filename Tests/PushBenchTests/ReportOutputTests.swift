import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Histogram
import Testing
@testable import PushBench

/// The report's three forms besides the table, without running a benchmark: the JSON a
/// script reads, the .hgrm distribution, and the SVG plot.
struct ReportOutputTests {
    /// 1 to 10,000 us, each once: a curve with a long tail.
    static func report(latencies: ClosedRange<UInt64>? = 1...10_000,
                       parameters: [(String, ReportValue)] = [("store", .text("127.0.0.1:7070")), ("connections", .integer(4)),
                                                              ("rate", .number(2.5)), ("tls", .boolean(false))]) -> BenchReport {
        var histogram = makeLatencyHistogram()
        if let latencies {
            for value in latencies { _ = histogram.record(value) }
        }
        var report = BenchReport(scenario: "store", parameters: parameters, operations: histogram.totalCount, seconds: 2,
                                 latency: histogram, startedAt: 1_700_000_000)
        report.version = "9.8.7 (protocol 1)"
        report.errors = ["timeout": 2]
        return report
    }

    @Test func jsonHasNumbersVersionAndTimestamp() throws {
        let object = try JSONSerialization.jsonObject(with: Data(Self.report().json.utf8))
        let json = try #require(object as? [String: Any])
        #expect(json["connections"] as? Int == 4, "a count is a JSON number, not a string")
        #expect(json["rate"] as? Double == 2.5)
        #expect(json["tls"] as? Bool == false)
        #expect(json["store"] as? String == "127.0.0.1:7070")
        #expect(json["version"] as? String == "9.8.7 (protocol 1)")
        #expect(json["errors"] as? Int == 2)
        let timestamp = try #require(json["timestamp"] as? String)
        #expect(timestamp.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)$"#, options: .regularExpression) != nil, "\(timestamp)")
        let parsed = try #require(ISO8601DateFormatter().date(from: timestamp))
        #expect(parsed.timeIntervalSince1970 == 1_700_000_000)
    }

    @Test func numbersJSONCannotCarryBecomeNull() {
        #expect(jsonNumber(.nan) == "null")
        #expect(jsonNumber(.infinity) == "null")
        #expect(jsonNumber(12.345) == "12.34")
        #expect(jsonNumber(-3) == "-3")
        #expect(jsonNumber(1234.6) == "1235")
    }

    @Test func hgrmIsHdrHistogramsPercentileFormatInMicroseconds() throws {
        let report = Self.report()
        let lines = report.percentileDistribution.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let header = lines[0].split(separator: " ", omittingEmptySubsequences: true)
        #expect(header == ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"])
        #expect(lines[1].isEmpty)
        let rows = lines.dropFirst(2).filter { !$0.isEmpty && !$0.hasPrefix("#") }.map { $0.split(separator: " ", omittingEmptySubsequences: true) }
        #expect(rows.count > 50)
        // Every row but the last (100 %) has four columns; percentiles and counts rise.
        #expect(rows.dropLast().allSatisfy { $0.count == 4 })
        #expect(rows.last?.count == 3)
        let percentiles = rows.compactMap { Double($0[1]) }
        #expect(percentiles == percentiles.sorted())
        #expect(percentiles.last == 1.0)
        let median = try #require(rows.first { Double($0[1]) == 0.5 })
        #expect(Double(median[0]) == Double(report.latency.valueAtPercentile(50)), "values are the recorded microseconds")
        let footer = lines.filter { $0.hasPrefix("#[") }
        #expect(footer.count == 3)
        #expect(footer[0].hasPrefix("#[Mean    ="))
        #expect(footer[1].contains("Total count    =        10000"))
        #expect(footer[2].hasPrefix("#[Buckets ="))
    }

    @Test func plotIsAnSVGDocumentWithTheCurve() throws {
        let report = Self.report()
        let plot = LatencyPlot(report: report)
        let document = try XMLDocument(xmlString: plot.svg)
        let root = try #require(document.rootElement())
        #expect(root.name == "svg")
        #expect(Self.attribute("viewBox", of: root) != nil)
        let curve = try #require(try document.nodes(forXPath: "//*[local-name()='polyline']").first as? XMLElement)
        let points = try #require(Self.attribute("points", of: curve)).split(separator: " ").map { pair in
            pair.split(separator: ",").compactMap { Double($0) }
        }
        #expect(points.count == plot.points.count)
        #expect(points.count > 30)
        // Left to right, and up (SVG y grows downwards) or level.
        #expect(zip(points, points.dropFirst()).allSatisfy { $0[0] < $1[0] && $0[1] >= $1[1] })
        let texts = try document.nodes(forXPath: "//*[local-name()='text']").compactMap(\.stringValue)
        #expect(texts.contains { $0.contains("securepush bench store") })
        #expect(texts.contains { $0.contains("securepush 9.8.7 (protocol 1)") && $0.contains(report.timestamp) })
        for tick in ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"] { #expect(texts.contains(tick), "tick \(tick)") }
        #expect(texts.contains("Latency (ms)"), "10,000 us and more are drawn in milliseconds")
        #expect(texts.contains { $0.hasPrefix("Percentile") })
    }

    /// An attribute by its local name (FoundationXML finds none by name on elements in the SVG namespace).
    static func attribute(_ name: String, of element: XMLElement) -> String? {
        element.attributes?.first { $0.localName == name || $0.name == name }?.stringValue
    }

    @Test func plotOfNothingIsStillAValidDocument() throws {
        let report = Self.report(latencies: nil, parameters: [("note", .text("<&\"odd\"> \u{1}"))])
        let svg = LatencyPlot(report: report).svg
        let document = try XMLDocument(xmlString: svg)
        #expect(try document.nodes(forXPath: "//*[local-name()='polyline']").isEmpty)
        #expect(svg.contains("no operation completed"))
        #expect(svg.contains("&lt;&amp;&quot;odd&quot;&gt;"))
    }

    @Test func plotAxisLabelsAndScale() {
        #expect(LatencyPlot.percentileLabel(decade: 0) == "0%")
        #expect(LatencyPlot.percentileLabel(decade: 2) == "99%")
        #expect(LatencyPlot.percentileLabel(decade: 5) == "99.999%")
        #expect(LatencyPlot.decades(forLargestX: 50) == 5)
        #expect(LatencyPlot.decades(forLargestX: 2_000_000) == 7)
        let scale = LatencyPlot.yScale(maximum: 17.5)
        #expect(scale.step == 5 && scale.top == 20)
        #expect(LatencyPlot.yScale(maximum: 6703).top == 8000)
        #expect(LatencyPlot.tickLabel(7.52, step: 0.5) == "7.5")
        #expect(LatencyPlot.tickLabel(1128, step: 200) == "1128")
        #expect(LatencyPlot.readable(8.134) == "8.13")
        #expect(LatencyPlot.readable(25.26) == "25.3")
        #expect(LatencyPlot.readable(1128.4) == "1128")
    }
}
