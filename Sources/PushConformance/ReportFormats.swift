#if canImport(Glibc)
import Glibc
#endif
import PushText

/// Machine-readable forms of a report: JSON for scripts, JUnit XML for CI dashboards.
extension ConformanceReport {
    public var json: String {
        let cases = results.map { result in
            "{\"id\":\(jsonString(result.id)),\"clause\":\(jsonString(result.clause)),\"title\":\(jsonString(result.title)),"
                + "\"verdict\":\(jsonString(result.verdict.rawValue)),\"detail\":\(jsonString(result.detail)),\"duration_ms\":\(result.durationMs)}"
        }
        let uncovered = notCovered.map { "{\"clause\":\(jsonString($0.clause)),\"reason\":\(jsonString($0.reason))}" }
        let summary = "{\"passed\":\(passed),\"failed\":\(failed),\"skipped\":\(skipped),\"cases\":\(results.count),\"selected\":\(selectedCount),"
            + "\"clauses_covered\":\(coveredClauses.count),\"clauses_total\":\(clausesTotal),\"duration_ms\":\(durationMs)}"
        return "{\"suite\":\"securepush conformance\",\"subject\":\(jsonString(subject)),\"run_id\":\(jsonString(runID)),"
            + "\"store\":\(store.map { jsonString($0.description) } ?? "null"),\"gateway\":\(gateway.map { jsonString($0.description) } ?? "null"),\n"
            + "\"aborted\":\(aborted.map(jsonString) ?? "null"),\n"
            + "\"summary\":\(summary),\n"
            + "\"cases\":[\n" + cases.joined(separator: ",\n") + "\n],\n"
            + "\"clauses_covered\":[" + coveredClauses.map(jsonString).joined(separator: ",") + "],\n"
            + "\"not_covered\":[\n" + uncovered.joined(separator: ",\n") + "\n]}\n"
    }

    public var junitXML: String {
        func seconds(_ ms: Int) -> String {
            let whole = ms / 1000, fraction = ms % 1000
            return "\(whole)." + String(repeating: "0", count: 3 - String(fraction).count) + String(fraction)
        }
        // A run that stopped early shows as one more test, in error: CI marks it red
        // even when no case failed.
        let errors = aborted == nil ? 0 : 1
        let tests = results.count + errors
        var lines = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>"]
        lines.append("<testsuites name=\"securepush conformance\" tests=\"\(tests)\" failures=\"\(failed)\" errors=\"\(errors)\" skipped=\"\(skipped)\" time=\"\(seconds(durationMs))\">")
        lines.append("  <testsuite name=\"securepush-conformance\" tests=\"\(tests)\" failures=\"\(failed)\" errors=\"\(errors)\" skipped=\"\(skipped)\" time=\"\(seconds(durationMs))\">")
        lines.append("    <properties>")
        lines.append("      <property name=\"clauses_covered\" value=\"\(coveredClauses.count)\"/>")
        lines.append("      <property name=\"clauses_total\" value=\"\(clausesTotal)\"/>")
        lines.append("    </properties>")
        for result in results {
            let group = result.id.split(separator: ".").first.map(String.init) ?? "conformance"
            let open = "    <testcase classname=\"conformance.\(xml(group))\" name=\"\(xml(result.id)) [\(xml(result.clause))]\" time=\"\(seconds(result.durationMs))\""
            switch result.verdict {
            case .pass:
                lines.append(open + "/>")
            case .fail:
                lines.append(open + ">")
                lines.append("      <failure message=\"\(xml(result.detail))\">[\(xml(result.clause))] \(xml(result.title)): \(xml(result.detail))</failure>")
                lines.append("    </testcase>")
            case .skipped:
                lines.append(open + ">")
                lines.append("      <skipped message=\"\(xml(result.detail))\"/>")
                lines.append("    </testcase>")
            }
        }
        if let aborted {
            lines.append("    <testcase classname=\"conformance.run\" name=\"the run (\(results.count) of \(selectedCount) cases)\" time=\"0.000\">")
            lines.append("      <error message=\"\(xml(aborted))\">\(xml(aborted))</error>")
            lines.append("    </testcase>")
        }
        lines.append("  </testsuite>")
        lines.append("</testsuites>")
        return lines.joined(separator: "\n") + "\n"
    }
}

public enum ReportWriteError: Error, CustomStringConvertible {
    case cannotWrite(String, errno: Int32)

    public var description: String {
        switch self {
        case .cannotWrite(let path, let code): "cannot write \(path): \(String(cString: strerror(code)))"
        }
    }
}

/// Writes a report file whole.
public func writeReportFile(_ path: String, _ text: String) throws(ReportWriteError) {
    guard let file = fopen(path, "w") else { throw .cannotWrite(path, errno: errno) }
    let bytes = Array(text.utf8)
    let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    let closed = fclose(file)
    guard written == bytes.count, closed == 0 else { throw .cannotWrite(path, errno: errno) }
}

/// A JSON string literal; control characters and non-ASCII are escaped so the output is
/// plain ASCII whatever a peer put in its error text.
func jsonString(_ text: String) -> String { JSONText.quoted(text, asciiOnly: true) }

/// Text for an XML attribute or element.
func xml(_ text: String) -> String { XMLText.escaped(text) }
