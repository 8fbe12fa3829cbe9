#if canImport(Glibc)
import Glibc
#endif

/// Unix-ms instants written as ISO 8601 in UTC (`2026-11-29T07:05:30Z`, or with
/// milliseconds `2026-11-29T07:05:30.123Z`), through libc's calendar: cheap enough for a
/// hot path, and what every date library parses.
public enum UTCTime {
    public static func iso8601(milliseconds: UInt64, fractional: Bool = false) -> String {
        var seconds = time_t(clamping: milliseconds / 1000)
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "\(milliseconds)" }
        var text = "\(parts.tm_year + 1900)-" + padded(parts.tm_mon + 1, 2) + "-" + padded(parts.tm_mday, 2)
            + "T" + padded(parts.tm_hour, 2) + ":" + padded(parts.tm_min, 2) + ":" + padded(parts.tm_sec, 2)
        if fractional { text += "." + padded(Int32(milliseconds % 1000), 3) }
        return text + "Z"
    }

    private static func padded(_ value: Int32, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
