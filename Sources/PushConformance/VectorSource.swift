#if canImport(Glibc)
import Glibc
#endif
import PushSecurity
import PushWire

/// The golden vectors (protocol/vectors/*.vec, SPEC.md section 9): the copy built into
/// the binary (`EmbeddedVectors`, kept equal to protocol/vectors by a test), or the
/// files of a directory given with `--vectors`.
public enum VectorSource {
    public struct Loaded: Sendable {
        /// The directory read; nil for the built-in vectors.
        public var directory: String?
        public var vectors: [TestVector]
        /// Files that did not parse, with the reason.
        public var problems: [String]
    }

    public static func load(explicit: String?) -> Loaded {
        guard let directory = explicit else { return parse(EmbeddedVectors.files, directory: nil) }
        var files: [(name: String, text: String)] = []
        var problems: [String] = []
        for name in vectorFiles(in: directory) {
            do {
                files.append((name, try Deployment.readFile(directory + "/" + name)))
            } catch {
                problems.append("\(name): \(error)")
            }
        }
        var loaded = parse(files, directory: directory)
        loaded.problems = problems + loaded.problems
        return loaded
    }

    static func parse(_ files: [(name: String, text: String)], directory: String?) -> Loaded {
        var vectors: [TestVector] = []
        var problems: [String] = []
        for (name, text) in files {
            do {
                vectors += try TestVector.parseFile(text)
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
