fn main() {
    let greeting = greet("world");
    println!("{greeting}");
}

fn greet(name: &str) -> String {
    format!("Hello, {name}!")
}
