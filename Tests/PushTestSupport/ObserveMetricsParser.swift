/// A strict reader of the Prometheus text exposition format (0.0.4), for tests: it
/// refuses what a lenient scraper would let pass, so a test that parses a service's
/// /metrics also checks the format. Every family must have HELP and TYPE before its
/// samples, a family's samples must be together, names and labels must be well formed,
/// a series must not repeat, counters must not be negative, and each histogram series
/// must have ascending `le` buckets ending in +Inf with non-decreasing counts, a `_sum`,
/// and a `_count` equal to its +Inf bucket.
public struct MetricsExposition: Sendable {
    public struct Sample: Sendable, Equatable {
        public var name: String
        public var labels: [String: String]
        public var value: Double
    }

    public struct Family: Sendable {
        public var name: String
        public var help: String?
        public var type: String?
        public var samples: [Sample] = []
    }

    public struct Failure: Error, CustomStringConvertible {
        public var line: Int
        public var problem: String
        public var description: String { "line \(line): \(problem)" }
    }

    public private(set) var families: [Family] = []

    public init(parsing text: String) throws(Failure) {
        guard text.isEmpty || text.hasSuffix("\n") else { throw Failure(line: 0, problem: "the text does not end with a newline") }
        var index: [String: Int] = [:]
        var seenSeries = Set<String>()
        var current: Int?
        for (offset, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            let number = offset + 1
            let line = String(rawLine)
            func fail(_ problem: String) -> Failure { Failure(line: number, problem: "\(problem): \(line)") }
            guard !line.isEmpty else { throw fail("empty line") }
            if line.hasPrefix("#") {
                let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
                guard parts.count >= 3, parts[0] == "#", parts[1] == "HELP" || parts[1] == "TYPE" else { continue }  // a comment
                let name = parts[2]
                guard MetricsExposition.isMetricName(name) else { throw fail("bad metric name") }
                let familyIndex: Int
                if let known = index[name] {
                    guard known == current, families[known].samples.isEmpty else { throw fail("\(parts[1]) after the family's samples or another family") }
                    familyIndex = known
                } else {
                    familyIndex = families.count
                    index[name] = familyIndex
                    families.append(Family(name: name))
                }
                current = familyIndex
                let rest = parts.count > 3 ? parts[3] : ""
                if parts[1] == "HELP" {
                    guard families[familyIndex].help == nil else { throw fail("second HELP") }
                    families[familyIndex].help = try MetricsExposition.unescapeHelp(rest).get(orThrow: fail("bad escape in HELP"))
                } else {
                    guard families[familyIndex].type == nil else { throw fail("second TYPE") }
                    guard ["counter", "gauge", "histogram", "summary", "untyped"].contains(rest) else { throw fail("unknown TYPE") }
                    families[familyIndex].type = rest
                }
                continue
            }
            guard let sample = MetricsExposition.parseSample(line) else { throw fail("malformed sample") }
            guard let familyIndex = current, MetricsExposition.belongs(sample.name, to: families[familyIndex]) else {
                throw fail("sample outside its family (each family needs HELP and TYPE first)")
            }
            guard families[familyIndex].help != nil, families[familyIndex].type != nil else { throw fail("sample before its family's HELP and TYPE") }
            let key = sample.name + "{" + sample.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",") + "}"
            guard seenSeries.insert(key).inserted else { throw fail("series repeated") }
            if families[familyIndex].type == "counter", !(sample.value >= 0) { throw fail("negative or NaN counter") }
            families[familyIndex].samples.append(sample)
        }
        for family in families {
            guard family.help != nil, family.type != nil else { throw Failure(line: 0, problem: "family \(family.name) lacks HELP or TYPE") }
            if family.type == "histogram" { try MetricsExposition.checkHistogram(family) }
        }
    }

    // MARK: reading

    public func family(_ name: String) -> Family? { families.first { $0.name == name } }

    /// The value of the sample with this name and exactly these labels.
    public func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        for family in families {
            if let sample = family.samples.first(where: { $0.name == name && $0.labels == labels }) { return sample.value }
        }
        return nil
    }

    /// A histogram series' observation count (`NAME_count`).
    public func histogramCount(_ family: String, _ labels: [String: String] = [:]) -> Double? {
        value(family + "_count", labels)
    }

    // MARK: checks

    private static func belongs(_ sample: String, to family: Family) -> Bool {
        switch family.type {
        case "histogram": [family.name + "_bucket", family.name + "_sum", family.name + "_count"].contains(sample)
        case "summary": [family.name, family.name + "_sum", family.name + "_count"].contains(sample)
        default: sample == family.name
        }
    }

    private static func checkHistogram(_ family: Family) throws(Failure) {
        func fail(_ problem: String) -> Failure { Failure(line: 0, problem: "histogram \(family.name): \(problem)") }
        var series: [[String: String]: [Sample]] = [:]
        for sample in family.samples {
            var labels = sample.labels
            labels["le"] = nil
            series[labels, default: []].append(sample)
        }
        for (labels, samples) in series {
            let buckets = samples.filter { $0.name == family.name + "_bucket" }
            guard !buckets.isEmpty, buckets.allSatisfy({ $0.labels["le"] != nil }) else { throw fail("\(labels): buckets without le") }
            var lastBound = -Double.infinity
            var lastCount = 0.0
            for bucket in buckets {
                guard let bound = parseValue(bucket.labels["le"] ?? ""), bound > lastBound else { throw fail("\(labels): le not ascending") }
                guard bucket.value >= lastCount else { throw fail("\(labels): bucket counts decrease") }
                lastBound = bound
                lastCount = bucket.value
            }
            guard lastBound == .infinity else { throw fail("\(labels): no +Inf bucket last") }
            guard samples.contains(where: { $0.name == family.name + "_sum" }) else { throw fail("\(labels): no _sum") }
            guard let count = samples.first(where: { $0.name == family.name + "_count" }), count.value == lastCount else {
                throw fail("\(labels): _count missing or not the +Inf bucket")
            }
        }
    }

    // MARK: lexing

    static func parseSample(_ line: String) -> Sample? {
        let bytes = Array(line.utf8)
        var position = 0
        while position < bytes.count, bytes[position] != UInt8(ascii: "{"), bytes[position] != UInt8(ascii: " ") { position += 1 }
        let name = String(decoding: bytes[0..<position], as: UTF8.self)
        guard isMetricName(name) else { return nil }
        var labels: [String: String] = [:]
        if position < bytes.count, bytes[position] == UInt8(ascii: "{") {
            position += 1
            while position < bytes.count, bytes[position] != UInt8(ascii: "}") {
                let start = position
                while position < bytes.count, bytes[position] != UInt8(ascii: "=") { position += 1 }
                let labelName = String(decoding: bytes[start..<position], as: UTF8.self)
                guard isLabelName(labelName), labels[labelName] == nil,
                      position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "\"") else { return nil }
                position += 2
                var value: [UInt8] = []
                while true {
                    guard position < bytes.count else { return nil }
                    let byte = bytes[position]
                    if byte == UInt8(ascii: "\"") { break }
                    if byte == UInt8(ascii: "\\") {
                        guard position + 1 < bytes.count else { return nil }
                        switch bytes[position + 1] {
                        case UInt8(ascii: "\\"): value.append(UInt8(ascii: "\\"))
                        case UInt8(ascii: "\""): value.append(UInt8(ascii: "\""))
                        case UInt8(ascii: "n"): value.append(UInt8(ascii: "\n"))
                        default: return nil
                        }
                        position += 2
                    } else {
                        value.append(byte)
                        position += 1
                    }
                }
                labels[labelName] = String(decoding: value, as: UTF8.self)
                position += 1
                if position < bytes.count, bytes[position] == UInt8(ascii: ",") { position += 1 }
            }
            guard position < bytes.count else { return nil }
            position += 1
        }
        guard position < bytes.count, bytes[position] == UInt8(ascii: " ") else { return nil }
        let fields = bytes[(position + 1)...].split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard fields.count == 1 || fields.count == 2,
              let value = parseValue(String(decoding: fields[0], as: UTF8.self)) else { return nil }
        if fields.count == 2, Int64(String(decoding: fields[1], as: UTF8.self)) == nil { return nil }
        return Sample(name: name, labels: labels, value: value)
    }

    static func parseValue(_ text: String) -> Double? {
        switch text {
        case "NaN": return .nan
        case "+Inf": return .infinity
        case "-Inf": return -.infinity
        default:
            // Digits, sign, point and exponent only: Double("inf") or hex floats are not the format's.
            guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isNumber || "+-.eE".contains($0)) }) else { return nil }
            return Double(text)
        }
    }

    static func unescapeHelp(_ text: String) -> String? {
        var out = ""
        var escaping = false
        for character in text {
            if escaping {
                switch character {
                case "\\": out.append("\\")
                case "n": out.append("\n")
                default: return nil
                }
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else {
                out.append(character)
            }
        }
        return escaping ? nil : out
    }

    static func isMetricName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first.isNameStart || first == ":" else { return false }
        return name.unicodeScalars.allSatisfy { $0.isNameStart || $0.isDigitScalar || $0 == ":" }
    }

    static func isLabelName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first.isNameStart else { return false }
        return name.unicodeScalars.allSatisfy { $0.isNameStart || $0.isDigitScalar }
    }
}

private extension Unicode.Scalar {
    var isNameStart: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) || self == "_" }
    var isDigitScalar: Bool { ("0"..."9").contains(self) }
}

private extension Optional {
    func get(orThrow failure: @autoclosure () -> MetricsExposition.Failure) throws(MetricsExposition.Failure) -> Wrapped {
        guard let value = self else { throw failure() }
        return value
    }
}
