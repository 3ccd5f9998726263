package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// series is one line of a panel.
type series struct {
	name  string
	color color.RGBA
	xs    []float64
	ys    []float64
}

// panel is one chart: log-log axes, its series, and a grey guide of
// slope 1 (linear growth) through the first point of the first series.
type panel struct {
	title, xlabel, ylabel string
	lines                 []series
	// guide draws the linear guides (time panels; memory must be flat).
	guide bool
}

var (
	blue   = color.RGBA{31, 119, 180, 255}
	orange = color.RGBA{255, 127, 14, 255}
	green  = color.RGBA{44, 160, 44, 255}
	grey   = color.RGBA{170, 170, 170, 255}
	black  = color.RGBA{0, 0, 0, 255}
)

// plotGrowth draws the growth benchmark's points: time and peak anonymous
// memory against the database's size (at the fewest revisions) and
// against the revisions (on the smallest database).
func plotGrowth(path string, pts []growthPoint) error {
	if len(pts) == 0 {
		return nil
	}
	bySize := func(p growthPoint) bool { return p.Revisions == pts[0].Revisions }
	byRevs := func(p growthPoint) bool { return p.DBMiB == pts[0].DBMiB }
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	mk := func(keep func(growthPoint) bool, x func(growthPoint) float64, y func(growthPoint, int) float64) []series {
		out := []series{{name: "full snapshot (zstd)", color: blue}, {name: "restore", color: orange}, {name: "compaction", color: green}}
		for _, p := range pts {
			if !keep(p) {
				continue
			}
			for i := range out {
				out[i].xs = append(out[i].xs, x(p))
				out[i].ys = append(out[i].ys, y(p, i))
			}
		}
		return out
	}
	took := func(p growthPoint, i int) float64 {
		return [3]float64{p.Full.Took.Seconds(), p.Restore.Took.Seconds(), p.Compact.Took.Seconds()}[i]
	}
	anon := func(p growthPoint, i int) float64 {
		// A full's child reports its peak resident set; the others their
		// anonymous memory, sampled.
		return [3]float64{mib(p.Full.PeakRSS), mib(p.Restore.Memory.Anon), mib(p.Compact.Memory.Anon)}[i]
	}
	size := func(p growthPoint) float64 { return mib(p.DBBytes) }
	revs := func(p growthPoint) float64 { return float64(p.Revisions) }
	panels := []panel{
		{title: "time against the database", xlabel: "database, MiB", ylabel: "s", lines: mk(bySize, size, took), guide: true},
		{title: "memory against the database", xlabel: "database, MiB", ylabel: "MiB", lines: mk(bySize, size, anon)},
		{title: "time against the revisions", xlabel: "revisions", ylabel: "s", lines: mk(byRevs, revs, took), guide: true},
		{title: "memory against the revisions", xlabel: "revisions", ylabel: "MiB", lines: mk(byRevs, revs, anon)},
	}
	const w, h = 1000, 760
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	text(img, 10, 16, black, "etcdkit growth, log-log: grey lines grow linearly (slope 1) from each first point; memory: peak anonymous (a full: peak RSS)")
	for i, p := range panels {
		x0, y0 := 10+(i%2)*(w/2), 30+(i/2)*((h-30)/2)
		p.draw(img, image.Rect(x0, y0, x0+w/2-20, y0+(h-30)/2-10))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func (p panel) draw(img *image.RGBA, r image.Rectangle) {
	text(img, r.Min.X+60, r.Min.Y+14, black, p.title)
	plot := image.Rect(r.Min.X+60, r.Min.Y+24, r.Max.X-10, r.Max.Y-60)
	lo, hi := [2]float64{math.Inf(1), math.Inf(1)}, [2]float64{math.Inf(-1), math.Inf(-1)}
	for _, s := range p.lines {
		for i := range s.xs {
			if s.xs[i] <= 0 || s.ys[i] <= 0 {
				continue
			}
			lo[0], hi[0] = min(lo[0], s.xs[i]), max(hi[0], s.xs[i])
			lo[1], hi[1] = min(lo[1], s.ys[i]), max(hi[1], s.ys[i])
		}
	}
	if math.IsInf(lo[0], 1) {
		return
	}
	// Decades that hold every point, at least one wide.
	for k := range 2 {
		lo[k] = math.Pow(10, math.Floor(math.Log10(lo[k])))
		hi[k] = math.Pow(10, math.Ceil(math.Log10(hi[k])))
		if hi[k] <= lo[k] {
			hi[k] = lo[k] * 10
		}
	}
	at := func(x, y float64) image.Point {
		fx := (math.Log10(x) - math.Log10(lo[0])) / (math.Log10(hi[0]) - math.Log10(lo[0]))
		fy := (math.Log10(y) - math.Log10(lo[1])) / (math.Log10(hi[1]) - math.Log10(lo[1]))
		return image.Pt(plot.Min.X+int(fx*float64(plot.Dx())), plot.Max.Y-int(fy*float64(plot.Dy())))
	}
	for v := lo[0]; v <= hi[0]*1.001; v *= 10 {
		pt := at(v, lo[1])
		line(img, pt, image.Pt(pt.X, plot.Min.Y), color.RGBA{235, 235, 235, 255})
		text(img, pt.X-10, plot.Max.Y+14, black, number(v))
	}
	for v := lo[1]; v <= hi[1]*1.001; v *= 10 {
		pt := at(lo[0], v)
		line(img, pt, image.Pt(plot.Max.X, pt.Y), color.RGBA{235, 235, 235, 255})
		text(img, plot.Min.X-50, pt.Y+4, black, number(v))
	}
	line(img, plot.Min, image.Pt(plot.Min.X, plot.Max.Y), black)
	line(img, image.Pt(plot.Min.X, plot.Max.Y), plot.Max, black)
	text(img, plot.Min.X+plot.Dx()/2-30, plot.Max.Y+30, black, p.xlabel)
	text(img, plot.Min.X-50, plot.Min.Y-4, black, p.ylabel)
	// The linear guide, through each series' first point.
	for _, s := range p.lines {
		if !p.guide || len(s.xs) < 2 || s.ys[0] <= 0 {
			continue
		}
		last := s.xs[len(s.xs)-1]
		line(img.SubImage(plot).(*image.RGBA), at(s.xs[0], s.ys[0]), at(last, s.ys[0]*last/s.xs[0]), grey)
	}
	for i, s := range p.lines {
		var prev image.Point
		for j := range s.xs {
			if s.xs[j] <= 0 || s.ys[j] <= 0 {
				continue
			}
			pt := at(s.xs[j], s.ys[j])
			if j > 0 {
				thick(img, prev, pt, s.color)
			}
			draw.Draw(img, image.Rect(pt.X-3, pt.Y-3, pt.X+4, pt.Y+4), image.NewUniform(s.color), image.Point{}, draw.Src)
			prev = pt
		}
		text(img, plot.Min.X+10+i*170, plot.Max.Y+48, s.color, s.name)
	}
}

func number(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

func text(img *image.RGBA, x, y int, c color.Color, s string) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// line draws a one-pixel line (Bresenham's, clipped by the image's
// bounds).
func line(img *image.RGBA, a, b image.Point, c color.RGBA) {
	dx, dy := abs(b.X-a.X), -abs(b.Y-a.Y)
	sx, sy := sign(b.X-a.X), sign(b.Y-a.Y)
	e := dx + dy
	for {
		if a.In(img.Bounds()) {
			img.SetRGBA(a.X, a.Y, c)
		}
		if a == b {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			a.X += sx
		} else {
			e += dx
			a.Y += sy
		}
	}
}

func thick(img *image.RGBA, a, b image.Point, c color.RGBA) {
	for _, d := range []image.Point{{0, 0}, {1, 0}, {0, 1}} {
		line(img, a.Add(d), b.Add(d), c)
	}
}

func abs(n int) int { return max(n, -n) }

func sign(n int) int {
	switch {
	case n > 0:
		return 1
	case n < 0:
		return -1
	}
	return 0
}
