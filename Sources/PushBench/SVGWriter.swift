import PushText

/// Just enough SVG for a chart: shapes and text with escaped content, coordinates
/// rounded to a tenth of a pixel. The result is a standalone XML document.
struct SVGWriter {
    private var lines: [String]

    init(width: Double, height: Double) {
        lines = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Self.number(width))\" height=\"\(Self.number(height))\" "
                    + "viewBox=\"0 0 \(Self.number(width)) \(Self.number(height))\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">"]
    }

    mutating func rect(x: Double, y: Double, width: Double, height: Double, fill: String = "none", stroke: String? = nil) {
        lines.append("<rect x=\"\(Self.number(x))\" y=\"\(Self.number(y))\" width=\"\(Self.number(width))\" height=\"\(Self.number(height))\" "
                     + "fill=\"\(fill)\"" + (stroke.map { " stroke=\"\($0)\"" } ?? "") + "/>")
    }

    mutating func line(x1: Double, y1: Double, x2: Double, y2: Double, stroke: String, dashed: Bool = false) {
        lines.append("<line x1=\"\(Self.number(x1))\" y1=\"\(Self.number(y1))\" x2=\"\(Self.number(x2))\" y2=\"\(Self.number(y2))\" "
                     + "stroke=\"\(stroke)\"" + (dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>")
    }

    mutating func circle(cx: Double, cy: Double, r: Double, fill: String) {
        lines.append("<circle cx=\"\(Self.number(cx))\" cy=\"\(Self.number(cy))\" r=\"\(Self.number(r))\" fill=\"\(fill)\"/>")
    }

    mutating func polyline(_ points: [(Double, Double)], stroke: String, width: Double, id: String) {
        let list = points.map { "\(Self.number($0.0)),\(Self.number($0.1))" }.joined(separator: " ")
        lines.append("<polyline id=\"\(id)\" fill=\"none\" stroke=\"\(stroke)\" stroke-width=\"\(Self.number(width))\" "
                     + "stroke-linejoin=\"round\" points=\"\(list)\"/>")
    }

    mutating func text(_ content: String, x: Double, y: Double, size: Double, anchor: String = "start", weight: String? = nil,
                       fill: String = "#000000", rotate: Double? = nil) {
        var attributes = "x=\"\(Self.number(x))\" y=\"\(Self.number(y))\" font-size=\"\(Self.number(size))\" text-anchor=\"\(anchor)\" fill=\"\(fill)\""
        if let weight { attributes += " font-weight=\"\(weight)\"" }
        if let rotate { attributes += " transform=\"rotate(\(Self.number(rotate)) \(Self.number(x)) \(Self.number(y)))\"" }
        lines.append("<text \(attributes)>\(XMLText.escaped(content))</text>")
    }

    func finish() -> String { (lines + ["</svg>"]).joined(separator: "\n") + "\n" }

    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        let tenths = (value * 10).rounded()
        return tenths.truncatingRemainder(dividingBy: 10) == 0 ? String(Int(tenths / 10)) : String(tenths / 10)
    }
}
