//! Plain-text tables with aligned columns; the last column wraps.

/// Renders `rows` under `header`, wrapping the last column at `width` characters.
pub fn render(header: &[&str], rows: &[Vec<String>], width: usize) -> String {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns.saturating_sub(1)) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let fixed: usize = widths[..columns.saturating_sub(1)]
        .iter()
        .map(|w| w + 2)
        .sum();
    let last_width = width.saturating_sub(fixed).max(30);
    let mut out = String::new();
    let mut line = |cells: Vec<String>| {
        let last = cells.last().cloned().unwrap_or_default();
        let wrapped = wrap(&last, last_width);
        for (n, piece) in wrapped.iter().enumerate() {
            for (i, w) in widths.iter().enumerate().take(columns.saturating_sub(1)) {
                let cell = if n == 0 { cells[i].as_str() } else { "" };
                out.push_str(&format!("{cell:<w$}  "));
            }
            out.push_str(piece);
            out.push('\n');
        }
    };
    line(header.iter().map(|h| h.to_string()).collect());
    line(
        widths
            .iter()
            .take(columns.saturating_sub(1))
            .map(|w| "-".repeat(*w))
            .chain(std::iter::once("-".repeat(last_width.min(40))))
            .collect(),
    );
    for row in rows {
        line(row.clone());
    }
    out
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let current = lines.last_mut().map(|l| l.chars().count()).unwrap_or(0);
        if current > 0 && current + 1 + word.chars().count() > width {
            lines.push(String::new());
        }
        if let Some(last) = lines.last_mut() {
            if !last.is_empty() {
                last.push(' ');
            }
            last.push_str(word);
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_last_column_wraps_under_itself() {
        let text = render(
            &["A", "B"],
            &[vec!["x".into(), "one two three four five six".into()]],
            14,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "A  B");
        assert!(lines.len() >= 3);
        assert!(lines[2].starts_with("x  one two"));
        assert!(lines.iter().skip(3).all(|l| l.starts_with("   ")));
    }
}
