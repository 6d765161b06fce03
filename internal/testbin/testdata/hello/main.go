// Command hello is what testbin's tests build.
package main

import "fmt"

func main() { fmt.Println("hello") }
