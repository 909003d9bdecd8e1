/// Adds two numbers.
pub fn add(a: i64, b: i64) -> i64 {
    a + b
}
