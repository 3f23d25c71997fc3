package game2048env

import (
	"fmt"
	"strings"
)

// Size is the board's width and height.
const Size = 4

// Game is a deterministic game of 2048: the same seed and the same moves always give the same
// boards, which is what makes a recorded sequence of moves replayable.
type Game struct {
	Board [Size][Size]int
	Score int
	Moves int
	rng   uint64
}

// NewGame starts a game whose tile spawns are drawn from seed.
func NewGame(seed uint64) *Game {
	g := &Game{rng: seed}
	g.spawn()
	g.spawn()
	return g
}

// next is splitmix64: tiny, and stable across Go releases, unlike math/rand's unspecified
// stream for a given seed.
func (g *Game) next() uint64 {
	g.rng += 0x9e3779b97f4a7c15
	z := g.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// spawn puts a 2 (nine times in ten) or a 4 on a random empty cell.
func (g *Game) spawn() {
	var empty [][2]int
	for r := range Size {
		for c := range Size {
			if g.Board[r][c] == 0 {
				empty = append(empty, [2]int{r, c})
			}
		}
	}
	if len(empty) == 0 {
		return
	}
	cell := empty[g.next()%uint64(len(empty))]
	value := 2
	if g.next()%10 == 0 {
		value = 4
	}
	g.Board[cell[0]][cell[1]] = value
}

// Directions are the moves, by name.
var Directions = []string{"up", "down", "left", "right"}

// cells returns the coordinates of line i as seen when sliding towards dir: index 0 is the
// cell tiles slide into.
func cells(dir string, i int) [Size][2]int {
	var out [Size][2]int
	for j := range Size {
		switch dir {
		case "left":
			out[j] = [2]int{i, j}
		case "right":
			out[j] = [2]int{i, Size - 1 - j}
		case "up":
			out[j] = [2]int{j, i}
		case "down":
			out[j] = [2]int{Size - 1 - j, i}
		}
	}
	return out
}

// Move slides the tiles towards dir, merging equal neighbours once per move, and spawns a tile
// if anything moved. It reports whether anything moved.
func (g *Game) Move(dir string) (bool, error) {
	switch dir {
	case "up", "down", "left", "right":
	default:
		return false, fmt.Errorf("direction %q: want one of %s", dir, strings.Join(Directions, ", "))
	}
	moved := false
	for i := range Size {
		line := cells(dir, i)
		var vals []int
		for _, p := range line {
			if v := g.Board[p[0]][p[1]]; v != 0 {
				vals = append(vals, v)
			}
		}
		var merged []int
		for k := 0; k < len(vals); k++ {
			if k+1 < len(vals) && vals[k] == vals[k+1] {
				merged = append(merged, 2*vals[k])
				g.Score += 2 * vals[k]
				k++
			} else {
				merged = append(merged, vals[k])
			}
		}
		for j, p := range line {
			v := 0
			if j < len(merged) {
				v = merged[j]
			}
			if g.Board[p[0]][p[1]] != v {
				moved = true
				g.Board[p[0]][p[1]] = v
			}
		}
	}
	if moved {
		g.Moves++
		g.spawn()
	}
	return moved, nil
}

// MaxTile returns the largest tile on the board.
func (g *Game) MaxTile() int {
	m := 0
	for _, row := range g.Board {
		for _, v := range row {
			m = max(m, v)
		}
	}
	return m
}

// Over reports whether no move can change the board.
func (g *Game) Over() bool {
	for r := range Size {
		for c := range Size {
			v := g.Board[r][c]
			if v == 0 || c+1 < Size && g.Board[r][c+1] == v || r+1 < Size && g.Board[r+1][c] == v {
				return false
			}
		}
	}
	return true
}

// String draws the board for agents that read text better than arrays.
func (g *Game) String() string {
	var b strings.Builder
	for _, row := range g.Board {
		for c, v := range row {
			if c > 0 {
				b.WriteByte(' ')
			}
			if v == 0 {
				fmt.Fprintf(&b, "%5s", ".")
			} else {
				fmt.Fprintf(&b, "%5d", v)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}
