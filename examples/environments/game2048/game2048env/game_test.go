package game2048env

import "testing"

func TestMovesSlideAndMergeOncePerMove(t *testing.T) {
	tests := []struct {
		name string
		row  [Size]int
		dir  string
		want [Size]int
		gain int
	}{
		{"pairs merge", [Size]int{2, 2, 2, 2}, "left", [Size]int{4, 4, 0, 0}, 8},
		{"a merged tile does not merge again", [Size]int{2, 2, 4, 0}, "left", [Size]int{4, 4, 0, 0}, 4},
		{"gaps close", [Size]int{4, 0, 0, 4}, "left", [Size]int{8, 0, 0, 0}, 8},
		{"the tile nearest the wall merges first", [Size]int{0, 2, 2, 2}, "right", [Size]int{0, 0, 2, 4}, 4},
		{"nothing to do", [Size]int{2, 4, 8, 16}, "left", [Size]int{2, 4, 8, 16}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Game{}
			g.Board[0] = tt.row
			moved, err := g.Move(tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			if g.Board[0] != tt.want || g.Score != tt.gain || moved != (tt.row != tt.want) {
				t.Fatalf("row %v → %v (score %d, moved %v), want %v (score %d)", tt.row, g.Board[0], g.Score, moved, tt.want, tt.gain)
			}
		})
	}
	if _, err := (&Game{}).Move("diagonal"); err == nil {
		t.Fatal("an unknown direction was accepted")
	}
}

func TestSameSeedSameGame(t *testing.T) {
	a, b := NewGame(9), NewGame(9)
	for _, d := range []string{"left", "up", "right", "down", "left", "up"} {
		_, _ = a.Move(d)
		_, _ = b.Move(d)
	}
	if a.Board != b.Board || a.Score != b.Score {
		t.Fatalf("same seed and moves gave\n%s\nand\n%s", a, b)
	}
	if NewGame(9).Board == NewGame(10).Board && NewGame(10).Board == NewGame(11).Board {
		t.Fatal("seeds do not change the deal")
	}
}
