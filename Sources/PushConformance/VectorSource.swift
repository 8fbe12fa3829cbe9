#if canImport(Glibc)
import Glibc
#endif
import PushSecurity
import PushWire

/// Finds and reads the golden vectors (protocol/vectors/*.vec, SPEC.md section 9).
///
/// Looked for, in order: the directory given with `--vectors`, `protocol/vectors` under
/// the current directory, and the directory of the source tree this build came from.
public enum VectorSource {
    /// `…/protocol/vectors` of the checkout this file was compiled in.
    public static let builtInDirectory: String = {
        // #filePath is …/Sources/PushConformance/VectorSource.swift: three levels up.
        var components = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        guard components.count > 3 else { return "protocol/vectors" }
        components.removeLast(3)
        return components.joined(separator: "/") + "/protocol/vectors"
    }()

    public struct Loaded: Sendable {
        /// The directory read, nil when none was found.
        public var directory: String?
        public var vectors: [TestVector]
        /// Files that did not parse, with the reason.
        public var problems: [String]
    }

    /// The directory to read: `explicit` when given, else the first usual place that exists.
    public static func locate(explicit: String?) -> String? {
        if let explicit { return explicit }
        for candidate in ["protocol/vectors", builtInDirectory] where !vectorFiles(in: candidate).isEmpty {
            return candidate
        }
        return nil
    }

    public static func load(explicit: String?) -> Loaded {
        guard let directory = locate(explicit: explicit) else { return Loaded(directory: nil, vectors: [], problems: []) }
        var vectors: [TestVector] = []
        var problems: [String] = []
        for name in vectorFiles(in: directory) {
            do {
                vectors += try TestVector.parseFile(try Deployment.readFile(directory + "/" + name))
            } catch {
                problems.append("\(name): \(error)")
            }
        }
        return Loaded(directory: directory, vectors: vectors, problems: problems)
    }

    /// The .vec files of a directory, sorted; empty when it cannot be read.
    static func vectorFiles(in directory: String) -> [String] {
        guard let handle = opendir(directory) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasSuffix(".vec") { names.append(name) }
        }
        return names.sorted()
    }
}
