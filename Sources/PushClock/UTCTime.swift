#if canImport(Glibc)
import Glibc
#endif

/// Unix-ms instants written as ISO 8601 in UTC (`2026-11-29T07:05:30Z`, or with
/// milliseconds `2026-11-29T07:05:30.123Z`): what every date library parses.
public enum UTCTime {
    public static func iso8601(milliseconds: UInt64, fractional: Bool = false) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(24)
        appendISO8601(milliseconds: milliseconds, fractional: fractional, to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// The same text appended as ASCII bytes: the HTTP API writes two into every answer
    /// to a SEND, so the date is worked out by arithmetic (days to a civil date, as in
    /// Howard Hinnant's `civil_from_days`) rather than by libc's calendar, which takes the
    /// time zone's lock, and no String is built.
    public static func appendISO8601(milliseconds: UInt64, fractional: Bool, to out: inout [UInt8]) {
        let seconds = milliseconds / 1000
        let days = seconds / 86_400
        // Year 10000 and later would need more than four digits: the plain number instead.
        guard days < 2_932_897 else {
            out.append(contentsOf: "\(milliseconds)".utf8)
            return
        }
        let secondOfDay = Int(seconds % 86_400)
        // civil_from_days, for days since 1970-01-01 (never negative here).
        let shifted = Int(days) + 719_468
        let era = shifted / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        digits(year, 4, &out)
        out.append(UInt8(ascii: "-"))
        digits(month, 2, &out)
        out.append(UInt8(ascii: "-"))
        digits(day, 2, &out)
        out.append(UInt8(ascii: "T"))
        digits(secondOfDay / 3600, 2, &out)
        out.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2, &out)
        out.append(UInt8(ascii: ":"))
        digits(secondOfDay % 60, 2, &out)
        if fractional {
            out.append(UInt8(ascii: "."))
            digits(Int(milliseconds % 1000), 3, &out)
        }
        out.append(UInt8(ascii: "Z"))
    }

    /// `value` in exactly `width` decimal digits, zero-padded.
    private static func digits(_ value: Int, _ width: Int, _ out: inout [UInt8]) {
        var divisor = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest / divisor % 10))
            rest %= divisor
            divisor /= 10
        }
    }
}
