"""The shared analyzer on Latin, CJK and mixed text, with each of its switches."""
from garden.analyzer import Analyzer, analyze, cjk_bigrams


def test_latin_text_is_lower_cased_and_split_into_words():
    assert analyze("The QUICK Foxes were Running", stopwords=False, stem=False) == [
        "the", "quick", "foxes", "were", "running"]


def test_accented_latin_is_lower_cased_not_stripped():
    assert analyze("Café ÉCOLE façade", stopwords=False, stem=False) == ["café", "école", "façade"]


def test_one_character_words_are_dropped_digits_kept():
    assert analyze("a b cd x1 2024", stopwords=False, stem=False) == ["cd", "x1", "2024"]


def test_stopwords_removed_only_when_asked():
    with_stopwords = analyze("the cat and the hat", stopwords=False, stem=False)
    without = analyze("the cat and the hat", stopwords=True, stem=False)
    assert with_stopwords == ["the", "cat", "and", "the", "hat"]
    assert without == ["cat", "hat"]


def test_stemming_only_when_asked():
    assert analyze("Foxes running quickly", stopwords=False, stem=True) == ["fox", "run", "quick"]
    assert analyze("Foxes running quickly", stopwords=False, stem=False) == ["foxes", "running", "quickly"]


def test_default_analyzer_stems_and_drops_stopwords():
    assert Analyzer()("The foxes were running") == ["fox", "were", "run"]
    assert Analyzer().key == "sw=1,stem=1"
    assert Analyzer(stopwords=False, stem=False).key == "sw=0,stem=0"


def test_cjk_runs_become_overlapping_bigrams():
    assert analyze("東京大学") == ["東京", "京大", "大学"]
    assert cjk_bigrams("東京大学") == ["東京", "京大", "大学"]


def test_a_lone_cjk_character_is_kept_as_one_term():
    assert analyze("東") == ["東"]


def test_kana_and_hangul_are_bigrammed_too():
    assert analyze("ひらがな カタカナ") == ["ひら", "らが", "がな", "カタ", "タカ", "カナ"]
    assert analyze("한국어") == ["한국", "국어"]


def test_mixed_runs_split_at_the_script_boundary():
    assert analyze("Tokyo東京大学research", stopwords=False, stem=False) == [
        "tokyo", "東京", "京大", "大学", "research"]


def test_stemming_touches_latin_words_only_in_mixed_text():
    assert analyze("Running東京 foxes", stopwords=True, stem=True) == ["run", "東京", "fox"]
    assert analyze("Running東京 foxes", stopwords=True, stem=False) == ["running", "東京", "foxes"]


def test_stopword_removal_leaves_cjk_alone():
    assert analyze("the 東京 and the 大学", stopwords=True, stem=False) == ["東京", "大学"]


def test_empty_and_punctuation_only_text_give_no_terms():
    assert analyze("") == []
    assert analyze("  -- !! ?? ") == []
